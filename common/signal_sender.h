// Who sent a signal, as its receiver saw it (siginfo_t): a process and its user, or the kernel. A stop that the
// job did not ask for (a SIGTERM to one rank, to mpirun) is named in the job's report by its sender
// (docs/faults.md), so the receivers keep it.
#pragma once

#include <csignal>
#include <cstddef>
#include <string>
#include <sys/types.h>

namespace train {

struct SignalSender {
  int signal = 0;
  pid_t pid = 0;            // si_pid: 0 when the kernel sent it
  uid_t uid = 0;            // si_uid
  bool from_kernel = false; // si_code > 0 (a fault, a timer) or SI_KERNEL: no process sent it
  std::string command;      // the sender's /proc/PID/comm when the signal came, "" when it could not be read
};

// The sender of a signal as a handler or sigwaitinfo() got it; `command` read from /proc at once.
SignalSender signal_sender_of(const siginfo_t& info);

// "SIGKILL" for 9, "signal 64" for ones without a name.
std::string signal_name(int signal_number);

// "SIGTERM from process 4321 (kill) of user root (uid 0)", "SIGTERM from the kernel".
std::string describe_signal(const SignalSender& sender);

// Reads /proc/PID/comm (its first line) into `command`, at most `size` - 1 bytes and 0-terminated, "" when it
// cannot. Only open, read and close: safe in a signal handler, where the sender is most likely still alive.
void read_command_name_in_handler(pid_t pid, char* command, size_t size);

}  // namespace train
