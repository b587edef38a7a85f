#include "entrypoint/worker_host.h"

#include "common/exit_codes.h"
#include "common/log.h"
#include "common/monotonic_clock.h"
#include "entrypoint/child_process.h"
#include "entrypoint/host_failure.h"
#include "entrypoint/launch_phases.h"
#include "entrypoint/network_probe.h"
#include "entrypoint/ranks_on_host.h"
#include "job/rank_mark.h"

#include <fmt/format.h>

#include <csignal>
#include <optional>
#include <thread>

namespace train {
namespace {

using clock = std::chrono::steady_clock;

constexpr auto poll_interval = std::chrono::milliseconds(500);
constexpr auto probe_interval = std::chrono::seconds(3);
constexpr auto probe_timeout = std::chrono::milliseconds(2500);
constexpr auto progress_every = std::chrono::seconds(30);
// How long a worker stays after its master is gone, so that the master's exit is seen first.
constexpr auto master_gone_margin = std::chrono::seconds(2);

// Tracks whether the master still answers, probing its sshd every few seconds.
class MasterWatch {
 public:
  MasterWatch(const JobDescription& job, std::string address, const MultiHostSettings& settings)
      : job_(job), address_(std::move(address)), settings_(settings) {}

  // Probes when due; throws HostFailure once the master has not answered for master_lost_timeout.
  void check() {
    auto now = clock::now();
    if (now < next_probe_) return;
    next_probe_ = now + probe_interval;
    std::string why_not;
    if (ssh_answers(address_, settings_.ssh_port, probe_timeout, &why_not)) {
      if (silent_since_logged_) {
        log_info("the master {} answers again after {} s", job_.cluster.master_host,
                 seconds_since(last_answer_));
        silent_since_logged_ = false;
      }
      last_answer_ = clock::now();
      return;
    }
    if (!silent_since_logged_) {
      log_info("the master {} ({}) stopped answering on port {}: {}", job_.cluster.master_host, address_,
               settings_.ssh_port, why_not);
      silent_since_logged_ = true;
    }
    if (clock::now() - last_answer_ > settings_.master_lost_timeout) lost(why_not);
  }

  // One immediate probe: when the ranks have just gone, a master that no longer answers was lost, not done.
  void confirm_alive() {
    std::string why_not;
    if (!ssh_answers(address_, settings_.ssh_port, probe_timeout, &why_not)) lost(why_not);
  }

 private:
  [[noreturn]] void lost(const std::string& why_not) {
    throw HostFailure(
        exit_code::host_lost,
        fmt::format("Host {} lost the master {}: its sshd at {}:{} stopped answering ({}), so the job cannot go on.",
                    job_.cluster.current_host, job_.cluster.master_host, address_, settings_.ssh_port, why_not),
        {"The master's own report (its failure file and log) says why, if it got to write one.",
         fmt::format("A worker gives up on a master that does not answer for {} s (TRAIN_MASTER_LOST_SECONDS).",
                     settings_.master_lost_timeout.count())});
  }

  const JobDescription& job_;
  std::string address_;
  const MultiHostSettings& settings_;
  clock::time_point last_answer_ = clock::now();
  clock::time_point next_probe_{};
  bool silent_since_logged_ = false;
};

void wait_for_master_sshd(const JobDescription& job, const std::string& address, const MultiHostSettings& settings,
                          JobWaiter& waiter, clock::time_point start) {
  std::string why_not;
  auto next_progress = clock::now();
  while (!ssh_answers(address, settings.ssh_port, probe_timeout, &why_not)) {
    if (clock::now() - start > settings.ranks_timeout) {
      throw HostFailure(exit_code::timed_out,
                        fmt::format("Host {} waited {} s for the master {} ({}) to answer on port {}, in vain.",
                                    job.cluster.current_host, settings.ranks_timeout.count(), job.cluster.master_host,
                                    address, settings.ssh_port),
                        {fmt::format("Last attempt: {}.", why_not),
                         "Check that the master host started; raise TRAIN_RANKS_TIMEOUT_SECONDS if it starts slowly."});
    }
    if (clock::now() >= next_progress) {
      log_info("waiting for the master {} ({}) to answer on port {} ({} s so far, up to {} s): {}",
               job.cluster.master_host, address, settings.ssh_port, seconds_since(start),
               settings.ranks_timeout.count(), why_not);
      next_progress = clock::now() + progress_every;
    }
    if (!waiter.pause(std::chrono::seconds(1))) return;
  }
}

// Ends this host's Open MPI daemons (and with them their ranks): SIGTERM, then SIGKILL.
void end_daemons(std::chrono::seconds grace) {
  for (pid_t pid : mpi_daemons_on_this_host()) ::kill(pid, SIGTERM);
  auto deadline = clock::now() + grace;
  while (!mpi_daemons_on_this_host().empty() && clock::now() < deadline) std::this_thread::sleep_for(poll_interval);
  for (pid_t pid : mpi_daemons_on_this_host()) ::kill(pid, SIGKILL);
}

// After this host's ranks have exited: wait (bounded) until the master is gone, then a little more, as the
// toolkit's worker outlives its master. Where the first container to exit decides the job's outcome (the
// SDK's local mode: docker-compose up --abort-on-container-exit), the master's exit code must come first; a
// worker that left at once made a failed job "complete". Returns 0 (the master reports the outcome), also
// when a stop signal ends the wait, which it does at once.
int outlive_master(const JobDescription& job, const std::string& address, const MultiHostSettings& settings,
                   JobWaiter& waiter) {
  const auto bound = settings.master_linger + settings.master_lost_timeout + std::chrono::seconds(30);
  log_info("the ranks on this host have exited; the master {} reports the job's outcome: waiting up to {} s for it "
           "to finish",
           job.cluster.master_host, bound.count());
  const auto start = clock::now();
  std::string why_not;
  while (ssh_answers(address, settings.ssh_port, probe_timeout, &why_not)) {
    if (clock::now() - start > bound) {
      log_info("the master {} still answers after {} s; this host is done", job.cluster.master_host, bound.count());
      return exit_code::success;
    }
    if (!waiter.pause(std::chrono::seconds(1))) {
      log_info("received {} while waiting for the master to finish; this host is done",
               signal_name(*waiter.stop_signal()));
      return exit_code::success;
    }
  }
  log_info("the master {} has finished ({}); this host is done", job.cluster.master_host, why_not);
  waiter.pause(master_gone_margin);
  return exit_code::success;
}

}  // namespace

int run_worker(const JobDescription& job, const std::string& master_address, const MultiHostSettings& settings,
               std::chrono::seconds stop_grace, JobWaiter& waiter) {
  const auto start = clock::now();
  const auto stopped = [&] { return exit_code::signal_base + *waiter.stop_signal(); };

  wait_for_master_sshd(job, master_address, settings, waiter, start);
  if (waiter.stop_signal()) return stopped();
  log_info("host {} is a worker: the master {} answers; waiting up to {} s for its mpirun to start the ranks here",
           job.cluster.current_host, job.cluster.master_host, settings.ranks_timeout.count());

  MasterWatch master(job, master_address, settings);
  auto next_progress = clock::now() + progress_every;
  while (mpi_daemons_on_this_host().empty() && !ranks_have_started()) {
    if (clock::now() - start > settings.ranks_timeout) {
      throw HostFailure(exit_code::timed_out,
                        fmt::format("Host {} waited {} s for the master {} to start ranks here, in vain.",
                                    job.cluster.current_host, settings.ranks_timeout.count(), job.cluster.master_host),
                        {"The master's log says what held it up (another host it waited for, or an error).",
                         "Raise TRAIN_RANKS_TIMEOUT_SECONDS if the master legitimately needs longer."});
    }
    if (clock::now() >= next_progress) {
      log_info("still waiting for the ranks to start on this host ({} s so far, up to {} s)", seconds_since(start),
               settings.ranks_timeout.count());
      next_progress = clock::now() + progress_every;
    }
    master.check();
    if (!waiter.pause(poll_interval)) return stopped();
  }
  log_info("the ranks have started on this host; watching them until they exit");
  note_launch_phase(LaunchPhase::ranks_up);
  log_launch_phases(job.cluster.current_host);

  while (!mpi_daemons_on_this_host().empty()) {
    if (waiter.stop_signal()) {
      // The master runs the stop: it tells every rank to checkpoint and exit. Give that time, then end
      // whatever is left here ourselves.
      log_info("waiting up to {} s for this host's ranks to finish stopping", stop_grace.count());
      auto deadline = clock::now() + stop_grace;
      while (!mpi_daemons_on_this_host().empty() && clock::now() < deadline) std::this_thread::sleep_for(poll_interval);
      end_daemons(std::chrono::seconds(5));
      return stopped();
    }
    try {
      master.check();
    } catch (const HostFailure&) {
      end_daemons(std::chrono::seconds(5));
      throw;
    }
    waiter.pause(poll_interval);
  }
  master.confirm_alive();
  return outlive_master(job, master_address, settings, waiter);
}

int run_idle_host(const JobDescription& job, const std::string& master_address, const MultiHostSettings& settings,
                  JobWaiter& waiter) {
  const auto start = clock::now();
  wait_for_master_sshd(job, master_address, settings, waiter, start);
  if (waiter.stop_signal()) return exit_code::signal_base + *waiter.stop_signal();
  log_info("host {} runs no rank: it waits for the job on {} to end (up to {} s)", job.cluster.current_host,
           fmt::join(job.cluster.hosts, ", "), settings.idle_timeout.count());
  MasterWatch master(job, master_address, settings);
  auto next_progress = clock::now() + progress_every;
  while (true) {
    try {
      master.check();
    } catch (const HostFailure&) {
      // For a host with no ranks the master going away is the job's end, whatever its outcome: the master's
      // report says which.
      log_info("the master {} no longer answers: the job has ended; the master reports its outcome",
               job.cluster.master_host);
      return exit_code::success;
    }
    if (clock::now() - start > settings.idle_timeout) {
      throw HostFailure(exit_code::timed_out,
                        fmt::format("Host {} (no ranks) waited {} s for the job to end, in vain.",
                                    job.cluster.current_host, settings.idle_timeout.count()),
                        {"Raise TRAIN_IDLE_HOST_TIMEOUT_SECONDS for a job that runs longer."});
    }
    if (clock::now() >= next_progress) {
      log_info("the job is still running on {} ({} s so far)", fmt::join(job.cluster.hosts, ", "), seconds_since(start));
      next_progress = clock::now() + 10 * progress_every;
    }
    if (!waiter.pause(poll_interval)) return exit_code::signal_base + *waiter.stop_signal();
  }
}

}  // namespace train
