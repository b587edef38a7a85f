#include "entrypoint/signal_inbox.h"

#include <fmt/format.h>

#include <cerrno>
#include <iterator>
#include <pthread.h>
#include <cstring>
#include <stdexcept>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

namespace train {

namespace {

constexpr int inbox_signals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGUSR2};

// The thread that reads the inbox. A signal sent to the process goes to a thread that does not block it:
// threads started before the inbox (OpenBLAS starts its pool when the library loads, and shuts it down
// only at the first fork) would take SIGTERM with the default action and end train at once. They run this
// handler instead, which hands the signal on to the inbox's thread, where it waits, blocked, for the
// signalfd.
pthread_t inbox_thread;

void hand_to_inbox(int signal_number) {
  const int saved = errno;
  ::pthread_kill(inbox_thread, signal_number);
  errno = saved;
}

}  // namespace

SignalInbox::SignalInbox() {
  sigset_t mask;
  sigemptyset(&mask);
  for (int sig : inbox_signals) sigaddset(&mask, sig);
  if (sigprocmask(SIG_BLOCK, &mask, &previous_mask_) != 0) {
    throw std::runtime_error(fmt::format("sigprocmask failed: {}", std::strerror(errno)));
  }
  inbox_thread = ::pthread_self();
  for (size_t i = 0; i < std::size(inbox_signals); ++i) {
    struct sigaction action {};
    action.sa_handler = hand_to_inbox;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    ::sigaction(inbox_signals[i], &action, &previous_actions_[i]);
  }
  // A relay write to a closed pipe must be an error code, not death.
  ::signal(SIGPIPE, SIG_IGN);
  fd_ = ::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) throw std::runtime_error(fmt::format("signalfd failed: {}", std::strerror(errno)));
}

SignalInbox::~SignalInbox() {
  for (size_t i = 0; i < std::size(inbox_signals); ++i) ::sigaction(inbox_signals[i], &previous_actions_[i], nullptr);
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
