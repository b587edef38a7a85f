// Pausing between polls in a multi-host job while staying responsive: a stop request (SIGTERM, SIGINT,
// ...) ends every wait at once, and children that exit are reaped and reported as they go.
#pragma once

#include "entrypoint/signal_inbox.h"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <sys/types.h>

namespace train {

class JobWaiter {
 public:
  explicit JobWaiter(SignalInbox& inbox) : inbox_(inbox) {}

  // Sleeps up to `duration`, handling signals; false once a stop signal has arrived (now or earlier).
  bool pause(std::chrono::milliseconds duration);

  // The first stop signal received, if any.
  std::optional<int> stop_signal() const { return stop_signal_; }

  // The wait status of a child reaped while waiting, if `pid` has exited.
  std::optional<int> exit_status(pid_t pid) const;

  SignalInbox& inbox() { return inbox_; }

 private:
  void handle(int signal_number);

  SignalInbox& inbox_;
  std::optional<int> stop_signal_;
  std::map<pid_t, int> exited_;
};

}  // namespace train
