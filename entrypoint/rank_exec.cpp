#include "rank_exec.h"

#include "child_process.h"
#include "config_error.h"
#include "exit_codes.h"
#include "job_description.h"
#include "log.h"
#include "rank_environment.h"

#include <csignal>
#include <ctime>
#include <sys/wait.h>
#include <unistd.h>

namespace train {

namespace {

// Ends this process the way the child ended, so mpirun reports the same code or signal.
[[noreturn]] void end_like(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    ::signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    sigprocmask(SIG_UNBLOCK, &only, nullptr);
    ::raise(sig);
  }
  ::_exit(exit_code_from_wait_status(status));
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
                               CheckMode::this_host);
  } catch (const ConfigError& error) {
    log_error("rank {}: the job description on this host is invalid:\n{}", identity->rank, error.what());
    return exit_code::invalid_job;
  }

  sigset_t handled;
  sigemptyset(&handled);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGCHLD}) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, nullptr);

  ChildProcess child;
  try {
    SpawnOptions options;
    options.capture_output = false;
    options.new_process_group = false;  // mpirun signals our group; the program must be in it
    options.die_with_parent = true;
    child = spawn_child(command, rank_program_environment(job, environment, *identity), options);
  } catch (const std::exception& error) {
    log_error("rank {}: {}", identity->rank, error.what());
    return exit_code::launch_failed;
  }

  while (true) {
    siginfo_t info{};
    timespec tick{1, 0};  // also re-checks the child once a second, in case a SIGCHLD was merged
    int sig = sigtimedwait(&handled, &info, &tick);
    if (sig == SIGUSR2) {
      ::kill(child.pid, SIGTERM);
    } else if (sig > 0 && sig != SIGCHLD) {
      ::kill(child.pid, sig);
    }
    int status = 0;
    pid_t done = ::waitpid(child.pid, &status, WNOHANG);
    if (done == child.pid) end_like(status);
  }
}

}  // namespace train
