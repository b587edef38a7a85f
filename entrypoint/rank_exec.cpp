#include "entrypoint/rank_exec.h"

#include "job/rank_mark.h"
#include "job/rank_reason.h"

#include "common/config_error.h"
#include "common/exit_codes.h"
#include "common/log.h"
#include "entrypoint/argument_limits.h"
#include "entrypoint/child_process.h"
#include "entrypoint/descendants.h"
#include "entrypoint/mpirun_outcome.h"
#include "entrypoint/signal_inbox.h"
#include "job/host_agreement.h"
#include "job/job_description.h"
#include "job/rank_environment.h"
#include "job/sagemaker_environment.h"
#include "job/torchrun_environment.h"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <ctime>
#include <optional>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace train {

namespace {

// How long what the program left behind gets between SIGTERM and SIGKILL, and the bound on the whole.
constexpr auto leftover_grace = std::chrono::seconds(2);
constexpr auto leftover_limit = std::chrono::seconds(10);

// Ends this process the way the child ended, so mpirun reports the same code or signal.
[[noreturn]] void end_like(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);  // the program's crash is the one worth a core file, not ours
    ::signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    ::raise(sig);
  }
  ::_exit(exit_code_from_wait_status(status));
}

// The library that makes gethostname() answer with the job's host name (preload/job_host_name.c), beside
// this executable, preloaded into a SageMaker job's command as the toolkit's MPI runner preloads its own
// (ahead of any LD_PRELOAD the job sets, which is kept). Elsewhere (AWS Batch, a local run) the host's name
// is the job's already.
void preload_job_host_name(const JobDescription& job, EnvironmentMap& environment, int rank) {
  if (!job.resource_config) return;
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  const auto library = self.parent_path() / "libtrain_job_host_name.so";
  if (error || !std::filesystem::exists(library, error)) {
    if (rank == 0) {
      log_info("warning: {} is missing, so gethostname() in the command returns the container's name, not \"{}\"",
               library.string(), job.cluster.current_host);
    }
    return;
  }
  const auto given = lookup(environment, "LD_PRELOAD");
  environment["LD_PRELOAD"] = library.string() + (given && !given->empty() ? ":" + *given : "");
}

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int run_rank_exec(const std::vector<std::string>& command) {
  EnvironmentMap environment = current_environment();
  auto identity = rank_identity_from_environment(environment);
  if (!identity) {
    log_error("`train rank-exec` is started by mpirun for `train -- CMD`; run `train -- CMD` instead");
    return exit_code::usage;
  }
  JobDescription job;
  try {
    job = load_job_description(JobPaths::from_environment(), environment, detect_host_resources(),
                               CheckMode::this_host, Workload::user_command);
    set_current_host_of_rank(job, *identity);
    if (!job.cluster.single_host()) mark_rank_started();
  } catch (const ConfigError& error) {
    const std::string message = fmt::format("rank {}: the job description on this host is invalid:\n{}",
                                            identity->rank, error.what());
    write_rank_reason(identity->rank, exit_code::invalid_job, 0, message);
    log_error("{}", message);
    return exit_code::invalid_job;
  }
  // This host's job description against the master's (job/host_agreement.h), before the command starts.
  if (auto disagreement = host_disagreement(job, environment, command)) {
    write_rank_reason(identity->rank, exit_code::invalid_job, 0, *disagreement, RankReasonKind::headline);
    log_error("{}", *disagreement);
    return exit_code::invalid_job;
  }

  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, nullptr);
  become_child_subreaper();

  // The user's hyperparameters follow the command, as the toolkit's runner appends them.
  std::vector<std::string> argv = command;
  for (auto& argument : user_command_arguments(job)) argv.push_back(std::move(argument));
  ChildProcess child;
  EnvironmentMap program_environment = rank_program_environment(job, environment, *identity);
  for (auto& [name, value] : torchrun_variables(job, *identity, environment)) program_environment[name] = value;
  program_environment.erase(master_port_variable);
  preload_job_host_name(job, program_environment, identity->rank);
  try {
    SpawnOptions options;
    options.capture_output = false;
    options.new_process_group = true;  // mpirun signals our group: SIGUSR2 must not reach the program
    options.die_with_parent = true;
    child = spawn_child(argv, program_environment, options);
  } catch (const std::exception& error) {
    const auto too_long =
        explain_if_argument_list_too_long(error, argv, program_environment, job.hyperparameters.decoded());
    const std::string message = too_long ? fmt::format("rank {}: {}: {}", identity->rank, error.what(), *too_long)
                                         : fmt::format("rank {}: {}", identity->rank, error.what());
    write_rank_reason(identity->rank, exit_code::launch_failed, 0, message);
    log_error("{}", message);
    return exit_code::launch_failed;
  }

  write_rank_started(identity->rank);  // the launcher's start-up wait is over
  std::optional<int> status;
  while (!status) {
    siginfo_t info{};
    timespec tick{1, 0};  // also re-checks the child once a second, in case a SIGCHLD was merged
    int sig = sigtimedwait(&handled, &info, &tick);
    if (sig > 0 && sig != SIGCHLD) {
      // To the program's whole group, as mpirun itself signals a rank: its helpers stop with it.
      int forwarded = sig == SIGUSR2 ? SIGTERM : sig;
      if (::kill(-child.pid, forwarded) != 0) ::kill(child.pid, forwarded);
    }
    // Orphans of the program are re-parented to us: reap them as they go, and watch for the program.
    reap_exited_children([&](pid_t pid, int child_status) {
      if (pid == child.pid) status = child_status;
    });
  }

  if (!(WIFEXITED(*status) && WEXITSTATUS(*status) == 0)) {
    // Which rank failed and how, for the launcher even when mpirun does not say; the reason itself is the
    // command's error output, which only the relay carries.
    write_rank_reason(identity->rank, WIFEXITED(*status) ? WEXITSTATUS(*status) : 0,
                      WIFSIGNALED(*status) ? WTERMSIG(*status) : 0, "");
    write_line(2, rank_end_report(identity->rank, base_name(command.front()), *status));
  }
  reap_exited_children(nullptr);
  if (auto leftovers = children_of(::getpid()); !leftovers.empty()) {
    log_info("rank {}: ending {} process(es) that the command left running", identity->rank, leftovers.size());
  }
  int left = end_all_children(leftover_grace, leftover_limit, nullptr);
  if (left > 0) log_error("rank {}: {} process(es) the command left behind could not be ended", identity->rank, left);
  end_like(*status);
}

}  // namespace train
