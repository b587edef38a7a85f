#include "runtime/stop_request.h"

#include <atomic>
#include <csignal>

namespace train {

namespace {

std::atomic<int> requested_by{0};

extern "C" void on_stop_signal(int signal_number) { requested_by.store(signal_number); }

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  for (int sig : {SIGUSR2, SIGTERM, SIGINT}) sigaction(sig, &action, nullptr);
}

bool stop_requested() { return requested_by.load() != 0; }
int stop_signal() { return requested_by.load(); }

}  // namespace train
