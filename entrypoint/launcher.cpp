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
#include "entrypoint/mpirun_command.h"
#include "entrypoint/mpirun_outcome.h"
#include "entrypoint/rank_memory.h"
#include "entrypoint/rank_output_relay.h"
#include "entrypoint/signal_inbox.h"
#include "job/rank_reason.h"

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
#include <sys/wait.h>
#include <unistd.h>

namespace train {

LaunchSettings launch_settings_from_environment(const EnvironmentMap& environment,
                                                std::vector<std::string> rank_program) {
  LaunchSettings settings;
  settings.rank_program = std::move(rank_program);
  if (auto mpirun = lookup(environment, "TRAIN_MPIRUN")) settings.mpirun = *mpirun;
  settings.stop_grace = read_seconds_variable(environment, WholeVariable::stop_grace_seconds);
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
// Lines of each rank's error output kept for the failure report.
constexpr size_t error_tail_lines = 20;

class JobRun {
 public:
  JobRun(const JobDescription& job, const LaunchSettings& settings) : job_(job), settings_(settings) {}

  int run(const EnvironmentMap& given_environment, SignalInbox& inbox, LauncherCompanions* companions) {
    companions_ = companions;
    become_child_subreaper();
    start_job_report(job_.paths);
    const OutputLocations* trained = job_.workload == Workload::train_resnet ? &job_.outputs : nullptr;
    if (auto problems = unwritable_directories(job_output_directories(job_.paths, trained, given_environment));
        !problems.empty()) {
      std::vector<std::string> details;
      std::string summary = describe_unwritable(problems, details);
      log_error("{}", summary);
      for (const auto& line : details) log_error("{}", line);
      write_failure_file(job_.paths, compose_failure_text(summary, details));
      return exit_code::environment;
    }
    EnvironmentMap ranks_environment = given_environment;
    try {
      reasons_ = std::make_unique<RankReasonFolder>();
      ranks_environment = reasons_->export_to(std::move(ranks_environment));
    } catch (const std::exception& error) {
      log_info("warning: no folder for the ranks' failure reasons ({}); relying on mpirun to relay them",
               error.what());
    }

    // The ranks' network: EFA's variables for NCCL across hosts, or a warning that it will use sockets.
    for (const auto& line : apply_efa_settings(job_, find_efa_devices(), ranks_environment)) log_info("{}", line);
    auto command =
        build_mpirun_command(job_, settings_.rank_program, ranks_environment, settings_.mpirun, settings_.hostfile);
    log_info("starting {} ranks ({} per host on {} host{}) on {}", job_.world_size(), job_.ranks_per_host,
             job_.cluster.hosts.size(), job_.cluster.hosts.size() == 1 ? "" : "s", job_.device);
    std::string shown;
    for (const auto& word : command) shown += (shown.empty() ? "" : " ") + word;
    log_info("mpirun command: {}", shown);
    oom_kills_at_start_ = cgroup_out_of_memory_kills();
    try {
      mpirun_ = spawn_child(command, ranks_environment, SpawnOptions{});
    } catch (const std::exception& error) {
      const auto* spawn = dynamic_cast<const SpawnError*>(&error);
      std::string summary = fmt::format("train could not start mpirun: {}.", error.what());
      log_error("{}", summary);
      write_failure_file(job_.paths, compose_failure_text(
          summary, {spawn != nullptr && spawn->error == E2BIG
                        ? explain_argument_list_too_long(command, ranks_environment, job_.hyperparameters.decoded()) + "."
                        : "Check that Open MPI is installed in the image (or set TRAIN_MPIRUN to its mpirun)."}));
      return exit_code::launch_failed;
    }
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
                 std::chrono::duration_cast<std::chrono::seconds>(drain_limit).count());
        close_output();
        return;
      }
      notice_failure();
      escalate_stop_if_due();
      if (!mpirun_status_) memory_.sample_if_due(mpirun_.pid);

      pollfd fds[3] = {{inbox.fd(), POLLIN, 0}, {mpirun_.stdout_fd, POLLIN, 0}, {mpirun_.stderr_fd, POLLIN, 0}};
      int ready = ::poll(fds, 3, 200);
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
    if (!stop_signal_) {
      stop_signal_ = signal_number;
      stop_time_ = std::chrono::system_clock::now();
      stop_steady_ = clock::now();
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

  void escalate_stop_if_due() {
    if (mpirun_status_) return;
    auto now = clock::now();
    const bool failure_due = failure_seen_ && now >= *failure_seen_ + teardown_limit;
    if (!terminate_sent_ && failure_due && !(stop_signal_ && now >= stop_deadline_)) {
      log_error("mpirun has not ended the job {} s after rank {} reported its failure (it waits for a host it "
                "cannot reach?); telling it to end now",
                std::chrono::duration_cast<std::chrono::seconds>(teardown_limit).count(), failed_rank_);
      ::kill(mpirun_.pid, SIGTERM);
      terminate_sent_ = true;
      teardown_forced_ = true;
      kill_deadline_ = now + kill_after_terminate;
    } else if (!terminate_sent_ && stop_signal_ && now >= stop_deadline_) {
      log_info("ranks are still running after the stop request; telling mpirun to end them");
      ::kill(mpirun_.pid, SIGTERM);
      terminate_sent_ = true;
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

  // After a stop request: whether train's ranks wrote a checkpoint since, which the failure file then says
  // (a second signal, or the grace period running out, can end them before they do).
  std::string stop_outcome() const {
    if (job_.workload != Workload::train_resnet) return "";
    struct stat status {};
    const auto file = job_.outputs.checkpoints / JobPaths::checkpoint_file_name;
    const bool written =
        ::stat(file.c_str(), &status) == 0 &&
        std::chrono::system_clock::time_point(std::chrono::seconds(status.st_mtim.tv_sec) +
                                              std::chrono::nanoseconds(status.st_mtim.tv_nsec)) >= stop_time_;
    if (written) return fmt::format(" A checkpoint was written after the stop request ({}): a restarted job resumes "
                                    "from it.", file.string());
    return fmt::format(" No checkpoint was written after the stop request (the ranks were ended first); a restarted "
                       "job resumes from the last earlier checkpoint in {}, if there is one.",
                       job_.outputs.checkpoints.string());
  }

  int report() {
    const int mpirun_code = mpirun_status_ ? exit_code_from_wait_status(*mpirun_status_) : exit_code::internal_error;
    // A stop request that came after a rank had failed does not hide that failure: the rank's reason is the
    // job's (a stop is what an operator does to a job that seems to hang).
    const bool failed_before_stop = failure_seen_ && (!stop_signal_ || *failure_seen_ <= stop_steady_);
    if (stop_signal_ && !failed_before_stop) {
      std::string summary = fmt::format(
          "The job was stopped by {} (SageMaker's stop or a spot interruption); the ranks were asked to checkpoint "
          "and exit, and mpirun then {}.{}",
          signal_name(*stop_signal_), mpirun_status_ ? describe_wait_status(*mpirun_status_) : "did not exit",
          stop_outcome());
      log_info("{}", summary);
      write_failure_file(job_.paths, compose_failure_text(summary, {}));
      return exit_code::signal_base + *stop_signal_;
    }
    if (mpirun_status_ && WIFEXITED(*mpirun_status_) && WEXITSTATUS(*mpirun_status_) == 0) {
      log_info("all {} ranks finished successfully", job_.world_size());
      if (write_success_file(job_.paths)) return exit_code::success;
      // SageMaker takes a job without output/success for a failed one: never exit 0 without it.
      std::string summary = fmt::format("Training finished, but train could not write {}.",
                                        job_.paths.success_file().string());
      log_error("{}", summary);
      write_failure_file(job_.paths, compose_failure_text(summary, {}));
      return exit_code::environment;
    }
    std::string summary;
    std::vector<std::string> details;
    int code = mpirun_code;
    // The ranks' own accounts (job/rank_reason.h) name the first failing rank even when mpirun did not get
    // to, and the earliest of them is the first failure, whichever rank mpirun's abort message happens to
    // name; mpirun's word stands when the rank it names left none (killed by a signal, or on another host).
    const std::vector<RankReason> reasons = reasons_ ? read_rank_reasons(reasons_->path()) : std::vector<RankReason>{};
    std::optional<RankFailure> failure = messages_.first_failure();
    const bool named_rank_has_reason =
        failure && std::any_of(reasons.begin(), reasons.end(), [&](const RankReason& r) { return r.rank == failure->rank; });
    if (!reasons.empty() && (!failure || named_rank_has_reason)) {
      const RankReason& first = reasons.front();
      failure = RankFailure{first.rank, std::nullopt, std::nullopt, ""};
      if (first.signal != 0) {
        failure->signal = first.signal;
      } else {
        failure->exit_code = first.exit_code;
      }
    }
    if (failure) {
      // Our name for the host (SageMaker's algo-N), not the machine name mpirun may know it by.
      std::string host = host_of_rank(job_, failure->rank);
      if (host == "?" && !failure->node.empty()) host = failure->node;
      std::string how = failure->signal
                            ? fmt::format("was killed by signal {} ({})", *failure->signal,
                                          signal_name(*failure->signal))
                            : fmt::format("exited with code {}", failure->exit_code.value_or(mpirun_code));
      summary = fmt::format("Rank {} of {} on host {} {}.", failure->rank, job_.world_size(), host, how);
      if (auto tail = error_tails_.find(failure->rank); tail != error_tails_.end()) {
        details.assign(tail->second.begin(), tail->second.end());
      }
      for (const auto& reason : reasons) {
        if (reason.rank == failure->rank) add_reason(reason, details);
      }
      if (details.empty()) details.push_back("(the rank wrote nothing to its error output)");
      if (failure->signal == SIGKILL) details.push_back(out_of_memory_hint(failure->rank));
      if (failure->code() != 0) code = failure->code();
      if (teardown_forced_) {
        details.push_back(fmt::format(
            "(mpirun did not end within {} s of the ranks' failure, waiting for a host it could no longer reach or "
            "a rank that would not end; train ended it and every process it had started)",
            std::chrono::duration_cast<std::chrono::seconds>(teardown_limit).count()));
      }
    } else if (!messages_.usage_error().empty()) {
      // mpirun refused its command line: the part of it that is the user's is custom_mpi_options.
      code = exit_code::launch_failed;
      const auto options = job_.hyperparameters.custom_mpi_options();
      summary = fmt::format("mpirun refused its command line: {}.", messages_.usage_error());
      if (!options.empty()) {
        details.push_back(fmt::format("The hyperparameter custom_mpi_options adds \"{}\" to it; check those options "
                                      "against the image's `mpirun --help`.",
                                      fmt::join(options, " ")));
      }
      const auto& own = messages_.own_error_lines();
      details.insert(details.end(), own.begin(), own.end());
    } else if (const std::string trouble = companions_ ? companions_->trouble() : ""; !trouble.empty()) {
      summary = trouble;
      details = messages_.own_error_lines();
      details.insert(details.begin(), fmt::format("mpirun {} before any rank reported a failure.",
                                                  mpirun_status_ ? describe_wait_status(*mpirun_status_)
                                                                 : "did not report its status"));
    } else {
      summary = fmt::format("mpirun {} before any rank reported a failure.",
                            mpirun_status_ ? describe_wait_status(*mpirun_status_) : "did not report its status");
      details = messages_.own_error_lines();
    }
    log_error("{}", summary);
    write_failure_file(job_.paths, compose_failure_text(summary, details));
    return code == 0 ? exit_code::internal_error : code;
  }

  // What a rank killed by SIGKILL is told: whether the out-of-memory killer struck in this container during
  // the job (its cgroup's count), the rank's peak memory as last seen, the host's memory and the batch.
  std::string out_of_memory_hint(int rank) const {
    const auto kills = cgroup_out_of_memory_kills();
    const uint64_t struck =
        kills && oom_kills_at_start_ && *kills > *oom_kills_at_start_ ? *kills - *oom_kills_at_start_ : 0;
    const auto peak = memory_.peak(rank);
    const std::string memory =
        (peak ? fmt::format("rank {}'s memory had peaked at {} when last seen; ", rank, memory_text(*peak)) : "") +
        host_memory_text();
    const std::string remedy =
        (job_.workload == Workload::train_resnet
             ? fmt::format("lower mini_batch_size ({} images per host over {} ranks) or image_shape",
                           job_.hyperparameters.integer("mini_batch_size"), job_.ranks_per_host)
             : std::string("use less memory per rank")) +
        ", run fewer ranks per host (processes_per_host), or use an instance with more memory";
    if (struck > 0) {
      return fmt::format("The kernel's out-of-memory killer ended {} process{} of this container during the job ({}): "
                         "{}.",
                         struck, struck == 1 ? "" : "es", memory, remedy);
    }
    return fmt::format("SIGKILL is often the kernel's out-of-memory killer ({}); if it was, {}.", memory, remedy);
  }

  // The reason's lines as the rank logged them ("[train] error: ..."), unless mpirun relayed them already.
  static void add_reason(const RankReason& reason, std::vector<std::string>& details) {
    if (reason.lines.empty()) return;
    const std::string first = "[train] error: " + reason.lines.front();
    if (std::find(details.begin(), details.end(), first) != details.end()) return;
    details.push_back(first);
    details.insert(details.end(), reason.lines.begin() + 1, reason.lines.end());
  }

  const JobDescription& job_;
  const LaunchSettings& settings_;
  LauncherCompanions* companions_ = nullptr;
  std::unique_ptr<RankReasonFolder> reasons_;
  std::chrono::system_clock::time_point stop_time_{};
  ChildProcess mpirun_;
  std::optional<int> mpirun_status_;
  std::optional<int> stop_signal_;
  clock::time_point stop_deadline_{};
  clock::time_point kill_deadline_{};
  bool terminate_sent_ = false;
  bool kill_sent_ = false;
  clock::time_point stop_steady_{};
  std::optional<clock::time_point> failure_seen_;  // when the job was first seen failing
  int failed_rank_ = -1;
  clock::time_point next_reason_check_{};
  bool teardown_forced_ = false;  // mpirun was ended by train after teardown_limit
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
