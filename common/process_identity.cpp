#include "common/process_identity.h"

#include <fmt/format.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace train {
namespace {

// The starttime field (22nd) of /proc/PID/stat; nullopt when the process is gone.
std::optional<unsigned long long> start_ticks_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  const auto close = stat.rfind(')');  // the command name may hold spaces and ')'
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && fields >> field; ++i) {
  }
  unsigned long long ticks = 0;
  if (!(fields >> ticks)) return std::nullopt;
  return ticks;
}

unsigned long long own_pid_namespace() {
  struct stat status {};
  if (::stat("/proc/self/ns/pid", &status) != 0) return 0;
  return static_cast<unsigned long long>(status.st_ino);
}

}  // namespace

std::string ProcessIdentity::to_text() const {
  return fmt::format("pid={} start={} pidns={}", pid, start_ticks, pid_namespace);
}

std::optional<ProcessIdentity> ProcessIdentity::from_text(const std::string& text) {
  ProcessIdentity identity;
  int pid = -1;
  if (std::sscanf(text.c_str(), "pid=%d start=%llu pidns=%llu", &pid, &identity.start_ticks,
                  &identity.pid_namespace) != 3 ||
      pid <= 0) {
    return std::nullopt;
  }
  identity.pid = pid;
  return identity;
}

ProcessIdentity this_process() {
  ProcessIdentity identity;
  identity.pid = ::getpid();
  identity.start_ticks = start_ticks_of(identity.pid).value_or(0);
  identity.pid_namespace = own_pid_namespace();
  return identity;
}

bool process_has_ended(const ProcessIdentity& owner) {
  if (owner.pid_namespace == 0 || owner.pid_namespace != own_pid_namespace()) return false;
  const auto ticks = start_ticks_of(owner.pid);
  return !ticks || *ticks != owner.start_ticks;
}

}  // namespace train
