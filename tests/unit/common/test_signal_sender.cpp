// Who sent a signal, in the words of a report: a process with its command and user, or the kernel.
#include "common/signal_sender.h"

#include <catch2/catch.hpp>

#include <csignal>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace train;

TEST_CASE("signal sender: a process with its command and its user, or the kernel", "[signal_sender]") {
  SignalSender sender;
  sender.signal = SIGTERM;
  sender.pid = 4321;
  sender.uid = 0;
  sender.command = "kill";
  CHECK(describe_signal(sender) == "SIGTERM from process 4321 (kill) of user root (uid 0)");
  sender.command.clear();
  sender.uid = 4000000;  // no such user
  CHECK(describe_signal(sender) == "SIGTERM from process 4321 of uid 4000000");
  sender.from_kernel = true;
  CHECK(describe_signal(sender) == "SIGTERM from the kernel");
  CHECK(signal_name(SIGXFSZ) == "SIGXFSZ");
  CHECK(signal_name(64) == "signal 64");
}

TEST_CASE("signal sender: the command name as a handler reads it", "[signal_sender]") {
  char command[64];
  read_command_name_in_handler(::getpid(), command, sizeof command);
  std::string expected;
  std::getline(std::ifstream("/proc/self/comm"), expected);
  CHECK(std::string(command) == expected);
  char small[4];
  read_command_name_in_handler(::getpid(), small, sizeof small);
  CHECK(std::string(small) == expected.substr(0, 3));
  read_command_name_in_handler(0, command, sizeof command);
  CHECK(std::string(command).empty());
}

TEST_CASE("signal sender: from a siginfo of kill()", "[signal_sender]") {
  siginfo_t info{};
  info.si_signo = SIGINT;
  info.si_code = SI_USER;
  info.si_pid = ::getpid();
  info.si_uid = ::getuid();
  const SignalSender sender = signal_sender_of(info);
  CHECK(sender.signal == SIGINT);
  CHECK_FALSE(sender.from_kernel);
  CHECK(sender.pid == ::getpid());
  CHECK_FALSE(sender.command.empty());
  info.si_code = SI_KERNEL;
  CHECK(signal_sender_of(info).from_kernel);
}
