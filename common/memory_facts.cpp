#include "common/memory_facts.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/resource.h>
#include <unistd.h>

namespace train {
namespace {

// The folder of this process's cgroup holding `file`: under the v2 mount (/sys/fs/cgroup) or the v1 memory
// controller's (/sys/fs/cgroup/memory), at the path /proc/self/cgroup names, or at the mount's root when
// that path is not there (a container's own cgroup mounted as the root, without a cgroup namespace).
std::optional<std::filesystem::path> cgroup_file(const std::string& v2_file, const std::string& v1_file) {
  std::ifstream in("/proc/self/cgroup");
  std::string line, v2_path, v1_path;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (controllers.empty()) v2_path = path;
    std::stringstream list(controllers);
    for (std::string controller; std::getline(list, controller, ',');) {
      if (controller == "memory") v1_path = path;
    }
  }
  std::error_code error;
  for (const auto& [root, path, file] : {std::tuple{std::string("/sys/fs/cgroup/memory"), v1_path, v1_file},
                                         std::tuple{std::string("/sys/fs/cgroup"), v2_path, v2_file}}) {
    for (const auto& folder : {std::filesystem::path(root) / std::filesystem::path(path).relative_path(),
                               std::filesystem::path(root)}) {
      if (std::filesystem::exists(folder / file, error)) return folder / file;
    }
  }
  return std::nullopt;
}

std::optional<uint64_t> read_number(const std::filesystem::path& file) {
  std::ifstream in(file);
  uint64_t value = 0;
  if (in >> value) return value;
  return std::nullopt;
}

// The number after `key` in a "key value" per line file.
std::optional<uint64_t> read_keyed(const std::filesystem::path& file, const std::string& key) {
  std::ifstream in(file);
  std::string name;
  uint64_t value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return std::nullopt;
}

}  // namespace

std::optional<uint64_t> host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  uint64_t kib = 0;
  while (in >> name >> kib >> unit) {
    if (name == "MemTotal:") return kib * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> cgroup_memory_limit_bytes() {
  const auto file = cgroup_file("memory.max", "memory.limit_in_bytes");
  if (!file) return std::nullopt;
  const auto limit = read_number(*file);  // v2's "max" reads as no number
  const auto host = host_memory_bytes();
  if (!limit || (host && *limit >= *host)) return std::nullopt;
  return limit;
}

std::optional<uint64_t> cgroup_out_of_memory_kills() {
  const auto file = cgroup_file("memory.events", "memory.oom_control");
  if (!file) return std::nullopt;
  return read_keyed(*file, "oom_kill");
}

uint64_t own_peak_memory_bytes() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // Linux reports KiB
}

std::optional<uint64_t> own_resident_memory_bytes() {
  std::ifstream in("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return std::nullopt;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

std::string memory_text(uint64_t bytes) {
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (mib < 1024.0) return fmt::format("{:.0f} MiB", mib);
  return fmt::format("{:.1f} GiB", mib / 1024.0);
}

std::string host_memory_text() {
  const auto host = host_memory_bytes();
  std::string text = host ? fmt::format("this host has {} of memory", memory_text(*host)) : "";
  if (const auto limit = cgroup_memory_limit_bytes()) {
    text += fmt::format("{}the container may use {}", text.empty() ? "" : ", ", memory_text(*limit));
  }
  return text.empty() ? "this host's memory is unknown" : text;
}

}  // namespace train
