#include "common/signal_sender.h"

#include <fmt/format.h>

#include <cstring>
#include <fcntl.h>
#include <pwd.h>
#include <unistd.h>

namespace train {

SignalSender signal_sender_of(const siginfo_t& info) {
  SignalSender sender;
  sender.signal = info.si_signo;
  sender.from_kernel = info.si_code > 0 || info.si_code == SI_KERNEL;
  if (!sender.from_kernel) {
    sender.pid = info.si_pid;
    sender.uid = info.si_uid;
    char command[64];
    read_command_name_in_handler(sender.pid, command, sizeof command);
    sender.command = command;
  }
  return sender;
}

std::string signal_name(int signal_number) {
  const char* abbreviation = sigabbrev_np(signal_number);
  if (abbreviation == nullptr) return fmt::format("signal {}", signal_number);
  return fmt::format("SIG{}", abbreviation);
}

std::string describe_signal(const SignalSender& sender) {
  const std::string name = signal_name(sender.signal);
  if (sender.from_kernel || sender.pid <= 0) return name + " from the kernel";
  std::string user = fmt::format("uid {}", sender.uid);
  passwd entry{};
  passwd* found = nullptr;
  char buffer[1024];
  if (::getpwuid_r(sender.uid, &entry, buffer, sizeof buffer, &found) == 0 && found != nullptr) {
    user = fmt::format("user {} (uid {})", found->pw_name, sender.uid);
  }
  const std::string command = sender.command.empty() ? "" : fmt::format(" ({})", sender.command);
  return fmt::format("{} from process {}{} of {}", name, sender.pid, command, user);
}

void read_command_name_in_handler(pid_t pid, char* command, size_t size) {
  if (size == 0) return;
  command[0] = '\0';
  if (pid <= 0) return;
  // "/proc/" + the decimal pid + "/comm", by hand: snprintf is not safe in a handler.
  char path[40] = "/proc/";
  char digits[20];
  size_t count = 0;
  for (auto value = static_cast<unsigned long>(pid); value > 0 && count < sizeof digits; value /= 10) {
    digits[count++] = static_cast<char>('0' + value % 10);
  }
  size_t at = 6;
  while (count > 0) path[at++] = digits[--count];
  for (const char* tail = "/comm"; *tail != '\0'; ++tail) path[at++] = *tail;
  path[at] = '\0';
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ssize_t got = ::read(fd, command, size - 1);
  ::close(fd);
  if (got <= 0) return;
  size_t length = static_cast<size_t>(got);
  for (size_t i = 0; i < length; ++i) {
    if (command[i] == '\n') length = i;
  }
  command[length] = '\0';
}

}  // namespace train
