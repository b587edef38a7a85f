#include "entrypoint/signal_inbox.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

namespace train {

SignalInbox::SignalInbox() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR2}) sigaddset(&mask, sig);
  if (sigprocmask(SIG_BLOCK, &mask, &previous_mask_) != 0) {
    throw std::runtime_error(fmt::format("sigprocmask failed: {}", std::strerror(errno)));
  }
  // A relay write to a closed pipe must be an error code, not death.
  ::signal(SIGPIPE, SIG_IGN);
  fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(fmt::format("signalfd failed: {}", std::strerror(errno)));
}

SignalInbox::~SignalInbox() {
  if (fd_ >= 0) ::close(fd_);
  sigprocmask(SIG_SETMASK, &previous_mask_, nullptr);
}

std::optional<int> SignalInbox::take() {
  signalfd_siginfo info{};
  ssize_t got;
  do {
    got = ::read(fd_, &info, sizeof info);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof info)) return std::nullopt;
  return static_cast<int>(info.ssi_signo);
}

void become_child_subreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

}  // namespace train
