// Starting a child with its output on pipes, in a process group of its own, with the signal mask and
// dispositions a fresh program expects (the launcher blocks the signals it reads through signalfd).
#pragma once

#include "common/environment_map.h"
#include "common/signal_sender.h"  // signal_name

#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

namespace train {

struct ChildProcess {
  pid_t pid = -1;
  int stdout_fd = -1;  // read ends, non-blocking; -1 when output is inherited
  int stderr_fd = -1;
};

struct SpawnOptions {
  bool capture_output = true;    // pipes for stdout and stderr, else inherit ours
  bool new_process_group = true; // so a signal to the group reaches it and all it started
  bool die_with_parent = false;  // SIGKILL it if this process dies first (a wrapper must not leave orphans)
  std::string working_directory;  // where it starts; empty: ours
};

// Why a child could not be started; `error` is the errno of the call that failed (exec's, when exec did).
class SpawnError : public std::runtime_error {
 public:
  SpawnError(const std::string& message, int error) : std::runtime_error(message), error(error) {}
  int error;
};

// Starts argv[0] (searched in PATH) with `environment`. Throws SpawnError with the reason when it cannot be
// started (including exec failing in the child, reported back through a close-on-exec pipe).
ChildProcess spawn_child(const std::vector<std::string>& argv, const EnvironmentMap& environment,
                         const SpawnOptions& options);

// "exited with code 3" / "was killed by signal 9 (SIGKILL)".
std::string describe_wait_status(int status);

// 0-255 for an exit, 128+N for a signal N: the shell's convention, which we keep for our own exit code.
int exit_code_from_wait_status(int status);

}  // namespace train
