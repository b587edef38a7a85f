#include "entrypoint/multi_host_launch.h"

#include "common/config_error.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/monotonic_clock.h"
#include "common/temporary_directory.h"
#include "entrypoint/batch_registration.h"
#include "entrypoint/child_process.h"
#include "entrypoint/descendants.h"
#include "entrypoint/host_failure.h"
#include "entrypoint/job_report.h"
#include "entrypoint/job_waiter.h"
#include "entrypoint/launch_phases.h"
#include "entrypoint/mpirun_command.h"
#include "entrypoint/multi_host_settings.h"
#include "entrypoint/network_probe.h"
#include "entrypoint/peer_probe.h"
#include "entrypoint/ranks_on_host.h"
#include "entrypoint/signal_inbox.h"
#include "entrypoint/sshd_service.h"
#include "entrypoint/worker_host.h"
#include "job/rank_mark.h"
#include "job/train_start.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <unistd.h>

namespace train {
namespace {

using clock = std::chrono::steady_clock;

constexpr auto progress_every = std::chrono::seconds(15);
// The master's wait for its peers: each probe's bound, and how often the hosts still silent are listed.
constexpr auto peer_probe_timeout = std::chrono::milliseconds(1500);
constexpr auto peers_progress_every = std::chrono::seconds(5);
// How often the wait for the peers looks at its probes (each answer is taken as soon as it comes, not at
// the next 100 ms), and the pause before hosts that refused are asked again: 20 ms at first (their sshd
// starts about when this one does), doubling up to 500 ms (a host that is slow to come).
constexpr auto peers_poll_every = std::chrono::milliseconds(10);
constexpr int first_polls_before_asking_again = 2;
constexpr int most_polls_before_asking_again = 50;

// This host's address on the job's interface; a missing interface is a configuration error on every host.
std::string own_address(const JobDescription& job) {
  const auto& interface = job.cluster.network_interface;
  if (auto address = interface_ipv4(interface)) return *address;
  auto names = interface_names();
  std::string where = job.cluster.platform == JobPlatform::sagemaker
                          ? "resourceconfig.json network_interface_name, or TRAIN_NETWORK_INTERFACE"
                          : "TRAIN_NETWORK_INTERFACE, default eth0";
  bool exists = std::find(names.begin(), names.end(), interface) != names.end();
  throw HostFailure(exit_code::invalid_job,
                    fmt::format("The job's network interface \"{}\" ({}) {} on host {}; its interfaces are: {}.",
                                interface, where, exists ? "has no IPv4 address" : "does not exist",
                                job.cluster.current_host, fmt::join(names, ", ")),
                    {"Name the interface the hosts reach each other on (TRAIN_NETWORK_INTERFACE overrides)."});
}

// Resolves `host`, retrying until `timeout` (SageMaker's names may resolve only after a while).
std::string resolve_with_retry(const std::string& host, std::chrono::seconds timeout, JobWaiter& waiter) {
  const auto start = clock::now();
  auto next_progress = start + std::chrono::seconds(2);
  std::string why_not;
  while (true) {
    if (auto address = resolve_ipv4(host, &why_not)) {
      if (clock::now() - start > std::chrono::seconds(1)) {
        log_info("host name {} resolved to {} after {} s", host, *address, seconds_since(start));
      }
      return *address;
    }
    if (clock::now() - start > timeout) {
      throw HostFailure(exit_code::timed_out,
                        fmt::format("The host name {} did not resolve within {} s ({}).", host, timeout.count(),
                                    why_not),
                        {"Check the job's host names and DNS; raise TRAIN_RESOLVE_TIMEOUT_SECONDS if names resolve "
                         "late."});
    }
    if (clock::now() >= next_progress) {
      log_info("host name {} does not resolve yet ({}); retrying for up to {} s", host, why_not, timeout.count());
      next_progress = clock::now() + progress_every;
    }
    if (!waiter.pause(std::chrono::milliseconds(500))) return "";
  }
}

// The master's wait for every other host's sshd: all silent hosts are probed at once in rounds (each probe
// bounded), and the deadline and stop signals are checked every 10 ms meanwhile, so neither waits for a
// round of slow probes to end.
void wait_for_peers(const JobDescription& job, const std::vector<std::string>& addresses,
                    const MultiHostSettings& settings, JobWaiter& waiter) {
  const auto start = clock::now();
  const auto deadline = start + settings.peers_timeout;
  auto next_progress = start + peers_progress_every;
  std::map<size_t, std::string> waiting;  // host index -> last reason
  for (size_t index = 0; index < addresses.size(); ++index) {
    if (job.cluster.hosts[index] != job.cluster.current_host) waiting[index] = "not tried yet";
  }
  log_info("master: waiting up to {} s for the sshd of {} other host(s)", settings.peers_timeout.count(),
           waiting.size());
  auto silent_hosts = [&] {
    std::vector<std::string> silent;
    for (const auto& [index, why_not] : waiting) {
      silent.push_back(fmt::format("{} ({}): {}", job.cluster.hosts[index], addresses[index], why_not));
    }
    return silent;
  };
  auto keep_going = [&] {
    if (!waiter.pause(peers_poll_every) || clock::now() >= deadline) return false;
    if (clock::now() >= next_progress) {
      log_info("master: still waiting for {} host(s) ({} s of {} s): {}", waiting.size(), seconds_since(start),
               settings.peers_timeout.count(), fmt::join(silent_hosts(), "; "));
      next_progress = clock::now() + peers_progress_every;
    }
    return true;
  };
  int polls_before_asking_again = first_polls_before_asking_again;
  while (!waiting.empty()) {
    std::vector<size_t> round;
    std::vector<std::string> round_addresses;
    for (const auto& [index, why_not] : waiting) {
      round.push_back(index);
      round_addresses.push_back(addresses[index]);
    }
    const auto results = probe_ssh_in_parallel(round_addresses, settings.ssh_port, peer_probe_timeout, keep_going);
    if (waiter.stop_signal()) return;
    for (size_t i = 0; i < round.size(); ++i) {
      if (results[i].answered) {
        log_info("master: host {} ({}) answers ({} s)", job.cluster.hosts[round[i]], addresses[round[i]],
                 seconds_since(start));
        waiting.erase(round[i]);
      } else if (!results[i].cut_short) {  // a probe cut short keeps the host's last reason
        waiting[round[i]] = results[i].why_not;
      }
    }
    if (waiting.empty()) break;
    if (clock::now() >= deadline) {
      throw HostFailure(exit_code::timed_out,
                        fmt::format("{} host(s) did not answer on port {} within {} s: {}.", waiting.size(),
                                    settings.ssh_port, settings.peers_timeout.count(),
                                    job.cluster.hosts[waiting.begin()->first]),
                        {fmt::format("Not answering: {}.", fmt::join(silent_hosts(), "; ")),
                         "Each host's train starts sshd; check that every host started and that port 22 is open "
                         "between them; raise TRAIN_PEERS_TIMEOUT_SECONDS if hosts start slowly."});
    }
    // A refused connection returns at once: pause before asking those hosts again.
    for (int i = 0; i < polls_before_asking_again; ++i) {
      if (!keep_going()) break;
    }
    polls_before_asking_again = std::min(2 * polls_before_asking_again, most_polls_before_asking_again);
  }
}

// A host file that exists while mpirun runs.
class TemporaryHostfile {
 public:
  TemporaryHostfile(const std::string& text, const EnvironmentMap& environment) {
    std::string pattern = temporary_directory(environment).string() + "/train-hostfile-XXXXXX";
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    int fd = ::mkstemp(name.data());
    if (fd < 0 || !write_fully(fd, text)) {
      throw HostFailure(exit_code::launch_failed, fmt::format("train could not write mpirun's host file {}.", pattern));
    }
    ::close(fd);
    path_ = name.data();
  }
  ~TemporaryHostfile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

class HostRun : private LauncherCompanions {
 public:
  HostRun(JobDescription job, const LaunchSettings& launch, const EnvironmentMap& environment)
      : job_(std::move(job)), launch_(launch), environment_(environment) {}

  int run() {
    become_child_subreaper();
    int code = exit_code::internal_error;
    try {
      settings_ = multi_host_settings_from_environment(environment_);
      code = run_role();
    } catch (const ConfigError& error) {
      code = fail(HostFailure(exit_code::invalid_job, fmt::format("The job description is invalid: {}", error.what())));
    } catch (const HostFailure& failure) {
      code = fail(failure);
    } catch (const RegistrationError& error) {
      code = fail(HostFailure(exit_code::launch_failed, error.what()));
    } catch (const std::runtime_error& error) {
      code = fail(HostFailure(exit_code::launch_failed,
                              fmt::format("Host {} could not take part in the job: {}", job_.cluster.current_host,
                                          error.what())));
    }
    if (sshd_) sshd_->stop();
    registration_.reset();
    int left = end_all_children(std::chrono::seconds(3), std::chrono::seconds(15), nullptr);
    if (left > 0) log_error("{} child process(es) could not be ended", left);
    return code;
  }

 private:
  int fail(const HostFailure& failure) {
    log_error("{}", failure.what());
    for (const auto& line : failure.details) log_error("{}", line);
    return report_failure(job_.paths, failure.what(), failure.details, failure.code);
  }

  int stopped() {
    int signal_number = *waiter_.stop_signal();
    return fail(HostFailure(exit_code::signal_base + signal_number,
                            fmt::format("Host {} was stopped by {} before its ranks started.", job_.cluster.current_host,
                                        signal_name(signal_number))));
  }

  int run_role() {
    const std::string address = own_address(job_);
    if (!job_.cluster.trains_here()) {
      // A host of an instance group outside the distribution: no rank runs here, so no sshd either.
      log_info("host {} ({} on {}): not in the training instance groups; the job trains on {}", job_.cluster.current_host,
               address, job_.cluster.network_interface, fmt::join(job_.cluster.hosts, ", "));
      const std::string master_address = resolve_with_retry(job_.cluster.master_host, settings_.resolve_timeout, waiter_);
      if (master_address.empty()) return stopped();
      return run_idle_host(job_, master_address, settings_, waiter_);
    }
    log_info("host {} ({} on {}): {} of a {}-host job", job_.cluster.current_host, address,
             job_.cluster.network_interface, job_.cluster.is_master() ? "master" : "worker", job_.cluster.hosts.size());
    const auto& batch = job_.cluster.batch;
    // The master's address: the one host that logs in to the others (its mpirun starts Open MPI's daemons
    // there; plm_rsh_no_tree_spawn: no other host does), so each sshd lets only it in.
    std::string master_address = address;
    if (!job_.cluster.is_master()) {
      master_address = batch ? batch->main_node_address
                             : resolve_with_retry(job_.cluster.master_host, settings_.resolve_timeout, waiter_);
      if (master_address.empty()) return stopped();
    }
    sshd_ = std::make_unique<SshdService>(settings_, address, std::vector<std::string>{master_address}, environment_,
                                          waiter_);
    note_launch_phase(LaunchPhase::sshd);

    if (!job_.cluster.is_master()) {
      clear_rank_mark();  // a mark left by an earlier job on this host is not this job's
      // mpirun forwards the master's TRAIN_STARTED_AT; this host's ranks count from this host's start.
      if (auto started = train_start_of_this_host(environment_, false)) leave_train_start_for_ranks(*started);
      if (batch && register_with_main_node(*batch, job_.ranks_per_host, settings_.registration_port,
                                           settings_.registration_timeout, waiter_)
                       .empty()) {
        return stopped();
      }
      note_launch_phase(LaunchPhase::registration);
      return run_worker(job_, master_address, settings_, launch_.stop_grace + std::chrono::seconds(15), waiter_);
    }

    // The master: every host's address in rank order, as mpirun will reach it.
    std::vector<std::string> addresses;
    std::vector<std::string> mpirun_hosts;
    if (batch) {
      registration_ = std::make_unique<RegistrationServer>(address, settings_.registration_port);
      auto children = registration_->collect(*batch, job_.ranks_per_host, settings_.registration_timeout, waiter_);
      if (waiter_.stop_signal()) return stopped();
      registration_->refuse_from_now_on(
          "every node of this job has registered and training has started; this node is not part of it (a restarted "
          "node cannot rejoin a running job)");
      addresses.push_back(address);
      for (const auto& [index, child] : children) addresses.push_back(child.address);
      mpirun_hosts = addresses;
    } else {
      for (const auto& host : job_.cluster.hosts) {
        addresses.push_back(host == job_.cluster.current_host
                                ? address
                                : resolve_with_retry(host, settings_.resolve_timeout, waiter_));
        if (addresses.back().empty()) return stopped();
      }
      mpirun_hosts = job_.cluster.hosts;  // by name, as the toolkit does: what ssh and Open MPI see
    }
    note_launch_phase(LaunchPhase::registration);
    wait_for_peers(job_, addresses, settings_, waiter_);
    if (waiter_.stop_signal()) return stopped();
    note_launch_phase(LaunchPhase::sshd_probes);

    LaunchSettings launch = launch_;
    std::optional<TemporaryHostfile> hostfile;
    // One training host (the others of a heterogeneous cluster wait): its ranks start locally, as on one host.
    if (!job_.cluster.single_host()) {
      hostfile.emplace(hostfile_text(mpirun_hosts, job_.ranks_per_host), environment_);
      launch.hostfile = hostfile->path();
    }
    int code = run_launcher(job_, launch, environment_, &waiter_.inbox(), this);
    // Workers tell a finished job from a lost master by whether the master still answers once their ranks
    // are gone; keep answering a little while.
    log_info("master: keeping sshd up {} s so that the workers see the job end", settings_.master_linger.count());
    // (A stop request does not shorten this: workers of a stopped job must not take it for a lost master.)
    std::this_thread::sleep_for(settings_.master_linger);
    return code;
  }

  // The launcher's companions: sshd, which it must leave running (a restarted one too) and which is started
  // again when it dies while the job runs.
  std::set<pid_t> pids() const override {
    if (sshd_ && sshd_->pid() > 0) return {sshd_->pid()};
    return {};
  }
  void exited(pid_t pid, int status) override {
    if (sshd_) sshd_->restart_if_ours(pid, status);
  }
  std::string trouble() const override { return sshd_ ? sshd_->death() : std::string(); }

  JobDescription job_;
  const LaunchSettings& launch_;
  const EnvironmentMap& environment_;
  MultiHostSettings settings_;
  SignalInbox inbox_;
  JobWaiter waiter_{inbox_};
  std::unique_ptr<SshdService> sshd_;
  std::unique_ptr<RegistrationServer> registration_;
};

}  // namespace

int run_multi_host(JobDescription job, const LaunchSettings& settings, const EnvironmentMap& environment) {
  HostRun run(std::move(job), settings, environment);
  return run.run();
}

}  // namespace train
