// The launcher is PID 1 in its container: the kernel gives it no default signal handling, and every
// orphan of the job is re-parented to it. It blocks the signals it cares about and reads them from a
// signalfd in its event loop, and it marks itself a child subreaper so that the same holds when it is not
// PID 1 (tests, a shell).
#pragma once

#include "common/non_copyable.h"

#include <optional>
#include <signal.h>

namespace train {

class SignalInbox : private NonCopyable {
 public:
  // Blocks SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD and SIGUSR2 (and ignores SIGPIPE) for this process;
  // other threads that do not block them hand them on to this one.
  SignalInbox();
  ~SignalInbox();

  int fd() const { return fd_; }
  // The next pending signal, if any (non-blocking).
  std::optional<int> take();

 private:
  int fd_ = -1;
  sigset_t previous_mask_{};
  struct sigaction previous_actions_[6] {};  // of the six signals it takes
};

// Orphaned descendants are re-parented to this process instead of PID 1 (no-op failure is harmless).
void become_child_subreaper();

}  // namespace train
