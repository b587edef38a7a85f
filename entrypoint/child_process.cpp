#include "entrypoint/child_process.h"

#include "entrypoint/program_exec.h"

#include <fmt/format.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace train {

namespace {

void close_if_open(int fd) {
  if (fd >= 0) ::close(fd);
}

void make_pipe(int fds[2]) {
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    throw SpawnError(fmt::format("pipe2 failed: {}", std::strerror(errno)), errno);
  }
}

}  // namespace

std::string describe_wait_status(int status) {
  if (WIFEXITED(status)) return fmt::format("exited with code {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    return fmt::format("was killed by signal {} ({})", WTERMSIG(status), signal_name(WTERMSIG(status)));
  }
  return fmt::format("ended with wait status {:#x}", status);
}

int exit_code_from_wait_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

ChildProcess spawn_child(const std::vector<std::string>& argv, const EnvironmentMap& environment,
                         const SpawnOptions& options) {
  if (argv.empty()) throw SpawnError("spawn_child: empty command", EINVAL);
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  int exec_status_pipe[2] = {-1, -1};
  if (options.capture_output) {
    make_pipe(out_pipe);
    make_pipe(err_pipe);
  }
  make_pipe(exec_status_pipe);

  // Everything the child needs is prepared before fork: after it, only async-signal-safe calls.
  std::vector<std::string> env_strings = to_envp_strings(environment);
  std::vector<char*> envp;
  for (auto& entry : env_strings) envp.push_back(entry.data());
  envp.push_back(nullptr);
  ProgramExec program(argv);  // execvpe's search, without running binaries through /bin/sh

  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int saved = errno;
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_status_pipe[0], exec_status_pipe[1]}) {
      close_if_open(fd);
    }
    throw SpawnError(fmt::format("fork failed: {}", std::strerror(saved)), saved);
  }
  if (pid == 0) {
    if (options.new_process_group) ::setpgid(0, 0);
    if (options.die_with_parent) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);  // the parent died before prctl took effect
    }
    // A fresh program starts with default dispositions and nothing blocked.
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD, SIGPIPE}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    if (options.capture_output) {
      ::dup2(out_pipe[1], STDOUT_FILENO);
      ::dup2(err_pipe[1], STDERR_FILENO);
    }
    // A folder it cannot enter is told apart from a program it cannot run by its sign.
    int error = !options.working_directory.empty() && ::chdir(options.working_directory.c_str()) != 0
                    ? -errno
                    : program.exec(envp.data());
    ssize_t ignored = ::write(exec_status_pipe[1], &error, sizeof error);
    (void)ignored;
    ::_exit(127);
  }
  if (options.new_process_group) ::setpgid(pid, pid);  // also here, so the group exists before we signal it
  close_if_open(out_pipe[1]);
  close_if_open(err_pipe[1]);
  close_if_open(exec_status_pipe[1]);

  int exec_error = 0;
  ssize_t got;
  do {
    got = ::read(exec_status_pipe[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(exec_status_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof exec_error)) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    close_if_open(out_pipe[0]);
    close_if_open(err_pipe[0]);
    if (exec_error < 0) {
      throw SpawnError(fmt::format("cannot run {} in {}: {}", argv[0], options.working_directory,
                                   std::strerror(-exec_error)),
                       -exec_error);
    }
    throw SpawnError(fmt::format("cannot run {}: {}", argv[0], std::strerror(exec_error)), exec_error);
  }

  ChildProcess child;
  child.pid = pid;
  if (options.capture_output) {
    child.stdout_fd = out_pipe[0];
    child.stderr_fd = err_pipe[0];
    for (int fd : {child.stdout_fd, child.stderr_fd}) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  return child;
}

}  // namespace train
