#include "entrypoint/descendants.h"

#include <csignal>
#include <dirent.h>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace train {

std::vector<pid_t> all_process_ids() {
  std::vector<pid_t> pids;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return pids;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (pid > 0 && *end == '\0') pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(proc);
  return pids;
}

namespace {

// The parent of `pid` from /proc/PID/stat; -1 when it is gone.
pid_t parent_process(pid_t pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(stat_file, stat)) return -1;
  // The command name is in parentheses and may itself contain spaces or ')': parse after the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  char state = 0;
  long ppid = -1;
  fields >> state >> ppid;
  return static_cast<pid_t>(ppid);
}

}  // namespace

std::vector<pid_t> children_of(pid_t parent) {
  std::vector<pid_t> children;
  for (pid_t pid : all_process_ids()) {
    if (parent_process(pid) == parent) children.push_back(pid);
  }
  return children;
}

std::vector<pid_t> descendants_of(pid_t root) {
  std::multimap<pid_t, pid_t> children;  // parent -> child, from one pass over /proc
  for (pid_t pid : all_process_ids()) children.emplace(parent_process(pid), pid);
  std::vector<pid_t> found;
  std::vector<pid_t> pending{root};
  while (!pending.empty()) {
    const pid_t parent = pending.back();
    pending.pop_back();
    for (auto [it, end] = children.equal_range(parent); it != end; ++it) {
      found.push_back(it->second);
      pending.push_back(it->second);
    }
  }
  return found;
}

int reap_exited_children(const std::function<void(pid_t, int)>& on_exit) {
  int reaped = 0;
  while (true) {
    int status = 0;
    pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid <= 0) break;
    ++reaped;
    if (on_exit) on_exit(pid, status);
  }
  return reaped;
}

int end_all_children(std::chrono::milliseconds grace, std::chrono::milliseconds limit,
                     const std::function<void(pid_t, int)>& on_exit, const std::set<pid_t>& spare) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // Ending a child re-parents its own children to us: every round signals the children it has not yet
  // signalled, so one that appears late gets its SIGTERM too, and after `grace` everything left is killed.
  std::set<pid_t> terminated;
  std::set<pid_t> killed;
  while (true) {
    reap_exited_children(on_exit);
    auto remaining = children_of(::getpid());
    std::erase_if(remaining, [&](pid_t pid) { return spare.count(pid) > 0; });
    if (remaining.empty()) return 0;
    auto elapsed = clock::now() - start;
    if (elapsed > limit) return static_cast<int>(remaining.size());
    const bool kill_now = elapsed >= grace;
    for (pid_t pid : remaining) {
      if (kill_now) {
        if (!killed.insert(pid).second) continue;
        ::kill(-pid, SIGKILL);  // its process group, if it leads one
        ::kill(pid, SIGKILL);
      } else if (terminated.insert(pid).second) {
        ::kill(pid, SIGTERM);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace train
