#include "runtime/stop_request.h"

#include "common/log.h"
#include "job/rank_reason.h"

#include <fmt/format.h>

#include <atomic>
#include <csignal>
#include <unistd.h>

namespace train {

namespace {

// The first stop signal and its sender, written once by the handler that wins `requested_by` (lock-free
// atomics and a plain buffer published by `sender_known`: all a handler may touch).
std::atomic<int> requested_by{0};
std::atomic<pid_t> sender_pid{0};
std::atomic<uid_t> sender_uid{0};
std::atomic<bool> sender_is_kernel{false};
std::atomic<bool> sender_is_parent{false};
std::atomic<bool> sender_known{false};
char sender_command[64];

extern "C" void on_stop_signal(int signal_number, siginfo_t* info, void*) {
  int none = 0;
  if (!requested_by.compare_exchange_strong(none, signal_number)) return;
  const bool kernel = info == nullptr || info->si_code > 0 || info->si_code == SI_KERNEL;
  sender_is_kernel.store(kernel);
  if (!kernel) {
    sender_pid.store(info->si_pid);
    sender_uid.store(info->si_uid);
    sender_is_parent.store(info->si_pid == ::getppid());
    read_command_name_in_handler(info->si_pid, sender_command, sizeof sender_command);
  }
  sender_known.store(true, std::memory_order_release);
}

// Whether this rank's stop is one the job did not ask for (the header says which are).
bool unasked() {
  const int signal_number = requested_by.load();
  if (signal_number == 0 || signal_number == SIGUSR2) return false;
  return !(sender_known.load(std::memory_order_acquire) && sender_is_parent.load());
}

}  // namespace

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_sigaction = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART | SA_SIGINFO;
  for (int sig : {SIGUSR2, SIGTERM, SIGINT}) sigaction(sig, &action, nullptr);
}

bool stop_requested() { return requested_by.load() != 0; }
int stop_signal() { return requested_by.load(); }

std::optional<SignalSender> stop_sender() {
  const int signal_number = requested_by.load();
  if (signal_number == 0 || !sender_known.load(std::memory_order_acquire)) return std::nullopt;
  SignalSender sender;
  sender.signal = signal_number;
  sender.from_kernel = sender_is_kernel.load();
  sender.pid = sender_pid.load();
  sender.uid = sender_uid.load();
  sender.command = sender_command;
  return sender;
}

int exit_code_after_stop(const RankIdentity& identity, const std::string& host, int64_t step, int64_t total_steps) {
  const auto sender = stop_sender();
  if (!unasked() || !sender) return 0;
  const std::string message = fmt::format(
      "Rank {} of {} on host {} received {}, a stop the job did not ask for: the ranks wrote a checkpoint at step "
      "{} of {} and stopped, so the job did not finish.\n"
      "A job is stopped by a signal to train, the container's first process (SageMaker's StopTrainingJob), never "
      "by one to a rank; a restarted job resumes from the checkpoint.",
      identity.rank, identity.size, host, describe_signal(*sender), step, total_steps);
  write_rank_reason(identity.rank, 128 + sender->signal, 0, message, RankReasonKind::headline);
  log_error("{}", message);
  return 128 + sender->signal;
}

}  // namespace train
