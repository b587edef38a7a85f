#include "entrypoint/ranks_on_host.h"

#include "entrypoint/descendants.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace train {
namespace {

std::string namespace_of(const std::string& process, const char* kind) {
  char target[128] = {};
  std::string link = "/proc/" + process + "/ns/" + kind;
  ssize_t size = ::readlink(link.c_str(), target, sizeof target - 1);
  return size > 0 ? std::string(target, static_cast<size_t>(size)) : std::string();
}

bool is_mpi_daemon(const std::string& process) {
  std::ifstream file("/proc/" + process + "/comm");
  std::string name;
  std::getline(file, name);
  return name == "orted" || name == "prted";
}

}  // namespace

std::vector<pid_t> mpi_daemons_on_this_host() {
  const std::string our_net = namespace_of("self", "net");
  const std::string our_uts = namespace_of("self", "uts");
  std::vector<pid_t> daemons;
  for (pid_t pid : all_process_ids()) {
    const std::string process = std::to_string(pid);
    if (!is_mpi_daemon(process)) continue;
    if (namespace_of(process, "net") != our_net || namespace_of(process, "uts") != our_uts) continue;
    daemons.push_back(pid);
  }
  return daemons;
}

}  // namespace train
