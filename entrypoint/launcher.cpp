#include "entrypoint/launcher.h"

#include "common/config_error.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "common/memory_facts.h"
#include "entrypoint/argument_limits.h"
#include "common/train_variables.h"
#include "entrypoint/child_process.h"
#include "entrypoint/descendants.h"
#include "entrypoint/job_directories.h"
#include "entrypoint/efa.h"
#include "entrypoint/job_report.h"
#include "entrypoint/job_verdict.h"
#include "entrypoint/launch_phases.h"
#include "entrypoint/mpirun_command.h"
#include "entrypoint/mpirun_outcome.h"
#include "entrypoint/mpirun_signals.h"
#include "entrypoint/rank_memory.h"
#include "entrypoint/rank_output_relay.h"
#include "entrypoint/signal_inbox.h"
#include "job/host_agreement.h"
#include "job/rank_reason.h"
#include "job/torchrun_environment.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace train {

LaunchSettings launch_settings_from_environment(const EnvironmentMap& environment,
                                                std::vector<std::string> rank_program) {
  LaunchSettings settings;
  settings.rank_program = std::move(rank_program);
  if (auto mpirun = lookup(environment, "TRAIN_MPIRUN")) settings.mpirun = *mpirun;
  settings.stop_grace = read_seconds_variable(environment, IntegerVariable::stop_grace_seconds);
  settings.ranks_timeout = read_seconds_variable(environment, IntegerVariable::ranks_timeout_seconds);
  return settings;
}

namespace {

using clock = std::chrono::steady_clock;

// How long after mpirun exits we still read output that its descendants may hold open.
constexpr auto drain_limit = std::chrono::seconds(5);
// After asking mpirun to kill the ranks, how long before everything is killed outright.
constexpr auto kill_after_terminate = std::chrono::seconds(10);
// After a rank has reported its failure, how long mpirun may take to end the job before it is told to. mpirun
// tears a job down in seconds, except when it waits for a daemon on a host it can no longer reach (that
// host's network gone): then it would wait for ever.
constexpr auto teardown_limit = std::chrono::seconds(20);
// How often the ranks' reason folder is looked at while the job runs.
constexpr auto reason_check_every = std::chrono::seconds(1);
// How often the wait for the ranks to start says it still waits.
constexpr auto start_progress_every = std::chrono::seconds(30);
// Lines of each rank's error output kept for the failure report.
constexpr size_t error_tail_lines = 20;

class JobRun {
 public:
  JobRun(const JobDescription& job, const LaunchSettings& settings) : job_(job), settings_(settings) {}

  int run(const EnvironmentMap& given_environment, SignalInbox& inbox, LauncherCompanions* companions) {
    companions_ = companions;
    become_child_subreaper();
    const OutputLocations* trained = job_.workload == Workload::train_resnet ? &job_.outputs : nullptr;
    if (auto problems = unwritable_directories(job_output_directories(job_.paths, trained, given_environment));
        !problems.empty()) {
      std::vector<std::string> details;
      std::string summary = describe_unwritable(problems, details);
      log_error("{}", summary);
      for (const auto& line : details) log_error("{}", line);
      return report_failure(job_.paths, summary, details, exit_code::environment);
    }
    EnvironmentMap ranks_environment = given_environment;
    try {
      reasons_ = std::make_unique<RankReasonFolder>();
      ranks_environment = reasons_->export_to(std::move(ranks_environment));
    } catch (const std::exception& error) {
      log_info("warning: no folder for the ranks' failure reasons ({}); relying on mpirun to relay them",
               error.what());
    }

    // Every rank holds its own host's job description against the master's before it starts its work.
    add_new_names_of_former_variables(ranks_environment);
    ranks_environment.erase(host_agreement_variable);
    if (job_.cluster.hosts.size() > 1) {
      ranks_environment[host_agreement_variable] = encode_host_agreement(host_agreement_items(job_, user_program()));
    }
    // torchrun's MASTER_PORT for a user's program: one port, chosen here on the master, for every rank.
    if (job_.workload == Workload::user_command) {
      try {
        ranks_environment[master_port_variable] = std::to_string(choose_master_port(given_environment));
      } catch (const std::exception& error) {
        log_error("{}", error.what());
        const bool bad = dynamic_cast<const ConfigError*>(&error) != nullptr;
        return report_failure(job_.paths, error.what(), {}, bad ? exit_code::invalid_job : exit_code::environment);
      }
    }
    // The ranks' network: EFA's variables for NCCL across hosts, or a warning that it will use sockets.
    for (const auto& line : apply_efa_settings(job_, find_efa_devices(), ranks_environment)) log_info("{}", line);
    auto command =
        build_mpirun_command(job_, settings_.rank_program, ranks_environment, settings_.mpirun, settings_.hostfile);
    log_info("starting {} ranks ({} per host on {} host{}) on {}", job_.world_size(), job_.ranks_per_host,
             job_.cluster.hosts.size(), job_.cluster.hosts.size() == 1 ? "" : "s", device_name(job_.device));
    std::string shown;
    for (const auto& word : command) shown += (shown.empty() ? "" : " ") + word;
    log_info("mpirun command: {}", shown);
    oom_kills_at_start_ = cgroup_out_of_memory_kills();
    try {
      // mpirun alone gets the witness of signals sent to it (its environment is not the ranks': -x names them).
      mpirun_ = spawn_child(command, reasons_ ? with_signal_witness(ranks_environment, mpirun_signals_file())
                                              : ranks_environment,
                            SpawnOptions{});
    } catch (const std::exception& error) {
      std::string summary = fmt::format("train could not start mpirun: {}.", error.what());
      log_error("{}", summary);
      const auto too_long =
          explain_if_argument_list_too_long(error, command, ranks_environment, job_.hyperparameters.decoded());
      return report_failure(
          job_.paths, summary,
          {too_long ? *too_long + "."
                    : "Check that Open MPI is installed in the image (or set TRAIN_MPIRUN to its mpirun)."},
          exit_code::launch_failed);
    }
    mpirun_started_ = clock::now();
    note_launch_phase(LaunchPhase::mpirun_start);
    event_loop(inbox);
    demux_.finish();
    int left = end_all_children(std::chrono::seconds(3), std::chrono::seconds(15),
                                [this](pid_t pid, int status) { on_child_exit(pid, status); },
                                companions_ ? companions_->pids() : std::set<pid_t>{});
    if (left > 0) log_error("{} child process(es) could not be ended", left);
    return report();
  }

 private:
  void event_loop(SignalInbox& inbox) {
    std::optional<clock::time_point> drain_deadline;
    while (true) {
      bool output_open = mpirun_.stdout_fd >= 0 || mpirun_.stderr_fd >= 0;
      if (mpirun_status_ && !output_open) return;
      if (mpirun_status_ && !drain_deadline) drain_deadline = clock::now() + drain_limit;
      if (drain_deadline && clock::now() > *drain_deadline) {
        log_info("mpirun has exited; its ranks' output pipes stayed open for {} s, so they are closed now",
                 drain_limit.count());
        close_output();
        return;
      }
      notice_failure();
      watch_ranks_start();
      escalate_stop_if_due();
      if (!mpirun_status_) memory_.sample_if_due(mpirun_.pid);

      pollfd fds[3] = {{inbox.fd(), POLLIN, 0}, {mpirun_.stdout_fd, POLLIN, 0}, {mpirun_.stderr_fd, POLLIN, 0}};
      int ready = ::poll(fds, 3, 100);  // the memory watch samples young ranks every 100 ms
      if (ready < 0 && errno != EINTR) {
        log_error("poll failed: {}", std::strerror(errno));
        return;
      }
      while (auto signal_number = inbox.take()) on_signal(*signal_number);
      read_output(mpirun_.stdout_fd, OutputStream::out, fds[1].revents);
      read_output(mpirun_.stderr_fd, OutputStream::err, fds[2].revents);
    }
  }

  void read_output(int& fd, OutputStream stream, short revents) {
    if (fd < 0 || revents == 0) return;
    char buffer[65536];
    while (true) {
      ssize_t got = ::read(fd, buffer, sizeof buffer);
      if (got > 0) {
        demux_.feed(stream, std::string_view(buffer, static_cast<size_t>(got)));
        continue;
      }
      if (got < 0 && errno == EINTR) continue;
      if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      ::close(fd);  // end of file, or an error that ends this stream
      fd = -1;
      return;
    }
  }

  void close_output() {
    for (int* fd : {&mpirun_.stdout_fd, &mpirun_.stderr_fd}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  void on_signal(int signal_number) {
    if (signal_number == SIGCHLD) {
      reap_exited_children([this](pid_t pid, int status) { on_child_exit(pid, status); });
      return;
    }
    if (signal_number == SIGUSR2) return;  // ours to send, not to act on
    const bool first = stop_signals_.empty();
    // The report needs the first and whether more came: a flood of signals need not grow the list.
    if (stop_signals_.size() < 4) stop_signals_.push_back(StopSignal{signal_number, clock::now()});
    if (first) {
      stop_time_ = std::chrono::system_clock::now();
      stop_deadline_ = clock::now() + settings_.stop_grace;
      log_info("received {}: asking every rank to checkpoint and stop (up to {} s)", signal_name(signal_number),
               settings_.stop_grace.count());
      // mpirun forwards SIGUSR2 to every rank on every host at once; it would turn SIGTERM into a kill
      // after only a second. Ranks treat SIGUSR2 as the stop request. It goes to mpirun's process group,
      // so it also reaches mpirun through a wrapper script that TRAIN_MPIRUN may name.
      if (!mpirun_status_ && ::kill(-mpirun_.pid, SIGUSR2) != 0) ::kill(mpirun_.pid, SIGUSR2);
    } else {
      log_info("received {} again: stopping the ranks now", signal_name(signal_number));
      stop_deadline_ = clock::now();
    }
  }

  // The first sign that the job is failing: a rank's reason in the folder, or mpirun or rank-exec naming a
  // failed rank. From then on mpirun has teardown_limit to end the job.
  void notice_failure() {
    if (failure_seen_ || mpirun_status_) return;
    const auto now = clock::now();
    std::optional<int> rank;
    if (auto failure = messages_.first_failure()) rank = failure->rank;
    if (!rank && reasons_ && now >= next_reason_check_) {
      next_reason_check_ = now + reason_check_every;
      if (auto reasons = read_rank_reasons(reasons_->path()); !reasons.empty()) rank = reasons.front().rank;
    }
    if (!rank) return;
    failure_seen_ = now;
    failed_rank_ = *rank;
  }

  // Until a rank says it has started (its mark in the reasons folder, or a line of its output), the wait for
  // it is bounded: mpirun that hangs while starting (out of descriptors, a daemon that never comes) is ended.
  // Without the folder (its creation failed: only warned) a quiet command could not say it started, so the
  // wait is not ended then.
  void watch_ranks_start() {
    if (!reasons_ || ranks_started_ || mpirun_status_ || terminate_sent_) return;
    const auto now = clock::now();
    if (now >= next_start_check_) {
      next_start_check_ = now + reason_check_every;
      if (any_rank_started(reasons_->path())) {
        ranks_are_up();
        return;
      }
    }
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(now - mpirun_started_);
    if (waited < settings_.ranks_timeout) {
      if (now >= next_start_progress_) {
        if (waited.count() > 0) {
          log_info("waiting for the ranks to start ({} s so far, up to {} s: TRAIN_RANKS_TIMEOUT_SECONDS)",
                   waited.count(), settings_.ranks_timeout.count());
        }
        next_start_progress_ = now + start_progress_every;
      }
      return;
    }
    log_error("no rank has started {} s after mpirun's start (TRAIN_RANKS_TIMEOUT_SECONDS); telling mpirun to end",
              settings_.ranks_timeout.count());
    ::kill(mpirun_.pid, SIGTERM);
    terminate_sent_ = true;
    ranks_never_started_ = true;
    kill_deadline_ = now + kill_after_terminate;
  }

  void ranks_are_up() {
    if (ranks_started_) return;
    ranks_started_ = true;
    note_launch_phase(LaunchPhase::ranks_up);
    log_launch_phases(job_.cluster.current_host);
  }

  void escalate_stop_if_due() {
    if (mpirun_status_) return;
    auto now = clock::now();
    const bool failure_due = failure_seen_ && now >= *failure_seen_ + teardown_limit;
    const bool stop_due = !stop_signals_.empty() && now >= stop_deadline_;
    if (!terminate_sent_ && stop_due) {  // an operator's stop is the job's story even after a failure
      log_info("ranks are still running after the stop request; telling mpirun to end them");
      ::kill(mpirun_.pid, SIGTERM);
      terminate_sent_ = true;
      kill_deadline_ = now + kill_after_terminate;
    } else if (!terminate_sent_ && failure_due) {
      log_error("mpirun has not ended the job {} s after rank {} reported its failure (it waits for a host it "
                "cannot reach?); telling it to end now",
                teardown_limit.count(), failed_rank_);
      ::kill(mpirun_.pid, SIGTERM);
      terminate_sent_ = true;
      teardown_forced_ = true;
      kill_deadline_ = now + kill_after_terminate;
    } else if (terminate_sent_ && !kill_sent_ && now >= kill_deadline_) {
      log_info("mpirun is still running; killing it and its process group");
      ::kill(-mpirun_.pid, SIGKILL);
      ::kill(mpirun_.pid, SIGKILL);
      kill_sent_ = true;
    }
  }

  void on_child_exit(pid_t pid, int status) {
    if (pid == mpirun_.pid) {
      mpirun_status_ = status;
    } else if (companions_) {
      companions_->exited(pid, status);
    }
  }

  void on_line(const RankLine& line) {
    int fd = line.stream == OutputStream::out ? STDOUT_FILENO : STDERR_FILENO;
    if (line.rank >= 0) {
      ranks_are_up();  // a rank that speaks has started
      write_line(fd, fmt::format("[rank {}] {}", line.rank, line.text));
      // rank-exec's own line about how the rank's command ended names the failure; the report's first
      // line says that already, so it is not one of the rank's error lines.
      if (line.stream == OutputStream::err && !messages_.observe_rank_line(line.rank, line.text)) {
        auto& tail = error_tails_[line.rank];
        tail.push_back(line.text);
        if (tail.size() > error_tail_lines) tail.pop_front();
      }
    } else {
      write_line(fd, "[mpirun] " + line.text);
      messages_.observe(line.text);
    }
  }

  // The user's command of `train -- CMD` (what follows rank-exec's "--"); empty for train's own training.
  std::vector<std::string> user_program() const {
    const auto& words = settings_.rank_program;
    const auto separator = std::find(words.begin(), words.end(), std::string("--"));
    return separator == words.end() ? std::vector<std::string>{} : std::vector<std::string>(separator + 1, words.end());
  }

  std::filesystem::path mpirun_signals_file() const { return reasons_->path() / "mpirun-signals"; }

  // Whether train's checkpoint file was written after the stop request (the report says so).
  bool checkpoint_after_stop() const {
    if (job_.workload != Workload::train_resnet || stop_signals_.empty()) return false;
    struct stat status {};
    const auto file = job_.outputs.checkpoints / JobPaths::checkpoint_file_name;
    return ::stat(file.c_str(), &status) == 0 &&
           std::chrono::system_clock::time_point(std::chrono::seconds(status.st_mtim.tv_sec) +
                                                 std::chrono::nanoseconds(status.st_mtim.tv_nsec)) >= stop_time_;
  }

  // Everything the report is decided from (entrypoint/job_verdict.h), as the job ends.
  JobEndFacts end_facts() const {
    JobEndFacts facts;
    facts.mpirun_status = mpirun_status_;
    facts.mpirun_messages = messages_;
    if (reasons_) facts.reasons = read_rank_reasons(reasons_->path());
    for (const auto& [rank, tail] : error_tails_) facts.error_tails[rank].assign(tail.begin(), tail.end());
    facts.failure_seen = failure_seen_;
    facts.stop_signals = stop_signals_;
    if (reasons_) facts.mpirun_signals = read_mpirun_signals(mpirun_signals_file(), ::getpid());
    facts.checkpoint_after_stop = checkpoint_after_stop();
    if (teardown_forced_) facts.teardown_forced_after = teardown_limit;
    if (ranks_never_started_) facts.ranks_never_started_after = settings_.ranks_timeout;
    if (companions_) facts.companion_trouble = companions_->trouble();
    facts.oom_kills_at_start = oom_kills_at_start_;
    facts.oom_kills_at_end = cgroup_out_of_memory_kills();
    facts.rank_peaks = memory_.peaks();
    facts.host_memory = host_memory_text();
    return facts;
  }

  int report() {
    JobVerdict verdict = decide_job_verdict(job_, end_facts());
    if (verdict.kind == JobVerdict::Kind::succeeded) {
      log_info("{}", verdict.summary);
      if (write_success_file(job_.paths)) return verdict.exit_code;
      verdict = success_file_unwritable(job_.paths);
    }
    if (verdict.kind == JobVerdict::Kind::stopped) {
      log_info("{}", verdict.summary);
    } else {
      log_error("{}", verdict.summary);
    }
    return report_failure(job_.paths, verdict.summary, verdict.details, verdict.exit_code);
  }

  const JobDescription& job_;
  const LaunchSettings& settings_;
  LauncherCompanions* companions_ = nullptr;
  std::unique_ptr<RankReasonFolder> reasons_;
  std::chrono::system_clock::time_point stop_time_{};  // the first stop request's, for the checkpoint's time
  ChildProcess mpirun_;
  std::optional<int> mpirun_status_;
  std::vector<StopSignal> stop_signals_;  // the stop requests received, in order
  clock::time_point stop_deadline_{};
  clock::time_point kill_deadline_{};
  bool terminate_sent_ = false;
  bool kill_sent_ = false;
  std::optional<clock::time_point> failure_seen_;  // when the job was first seen failing
  int failed_rank_ = -1;
  clock::time_point next_reason_check_{};
  bool teardown_forced_ = false;  // mpirun was ended by train after teardown_limit
  clock::time_point mpirun_started_{};
  bool ranks_started_ = false;
  bool ranks_never_started_ = false;  // mpirun was ended by train after settings_.ranks_timeout
  clock::time_point next_start_check_{};
  clock::time_point next_start_progress_{};
  RankMemoryWatch memory_;
  std::optional<uint64_t> oom_kills_at_start_;
  MpirunMessages messages_;
  std::map<int, std::deque<std::string>> error_tails_;
  TaggedOutputDemux demux_{[this](const RankLine& line) { on_line(line); }};
};

}  // namespace

int run_launcher(const JobDescription& job, const LaunchSettings& settings, const EnvironmentMap& environment,
                 SignalInbox* inbox, LauncherCompanions* companions) {
  JobRun run(job, settings);
  if (inbox != nullptr) return run.run(environment, *inbox, companions);
  SignalInbox own_inbox;
  return run.run(environment, own_inbox, companions);
}

}  // namespace train
