#include "entrypoint/job_waiter.h"

#include "common/log.h"
#include "entrypoint/child_process.h"
#include "entrypoint/descendants.h"

#include <cerrno>
#include <csignal>
#include <poll.h>

namespace train {

bool JobWaiter::pause(std::chrono::milliseconds duration) {
  const auto deadline = std::chrono::steady_clock::now() + duration;
  while (!stop_signal_) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd waiting{inbox_.fd(), POLLIN, 0};
    int ready = ::poll(&waiting, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR) break;
    while (auto signal_number = inbox_.take()) handle(*signal_number);
  }
  return !stop_signal_;
}

std::optional<int> JobWaiter::exit_status(pid_t pid) const {
  auto found = exited_.find(pid);
  if (found == exited_.end()) return std::nullopt;
  return found->second;
}

void JobWaiter::handle(int signal_number) {
  if (signal_number == SIGCHLD) {
    reap_exited_children([this](pid_t pid, int status) { exited_[pid] = status; });
    return;
  }
  if (signal_number == SIGUSR2) return;  // ours to send to ranks, not a request to us
  if (!stop_signal_) {
    stop_signal_ = signal_number;
    log_info("received {} while waiting: stopping", signal_name(signal_number));
  }
}

}  // namespace train
