#include "entrypoint/rank_memory.h"

#include "entrypoint/descendants.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

namespace train {
namespace {

// A process's rank from its environment (Open MPI sets OMPI_COMM_WORLD_RANK for every rank's process and
// its children inherit it); -1 when it has none.
int rank_of_process(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ", std::ios::binary);
  const std::string prefix = "OMPI_COMM_WORLD_RANK=";
  for (std::string entry; std::getline(in, entry, '\0');) {
    if (entry.rfind(prefix, 0) == 0) {
      try {
        return std::stoi(entry.substr(prefix.size()));
      } catch (const std::exception&) {
        return -1;
      }
    }
  }
  return -1;
}

std::optional<uint64_t> peak_resident_bytes(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // "VmHWM:   123456 kB"
  }
  return std::nullopt;
}

}  // namespace

void RankMemoryWatch::sample_if_due(pid_t root) {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_ || root <= 0) return;
  if (first_ == std::chrono::steady_clock::time_point{}) first_ = now;
  next_ = now + (now - first_ < young_for ? young_every : every);
  std::set<pid_t> seen;
  for (pid_t pid : descendants_of(root)) {
    seen.insert(pid);
    // Only a rank is remembered: a process seen between mpirun's fork and its exec of the rank does not carry
    // OMPI_COMM_WORLD_RANK yet, and is asked again next time.
    auto known = rank_of_.find(pid);
    if (known == rank_of_.end()) {
      const int rank = rank_of_process(pid);
      if (rank < 0) continue;
      known = rank_of_.emplace(pid, rank).first;
    }
    if (auto peak = peak_resident_bytes(pid)) peaks_[known->second] = std::max(peaks_[known->second], *peak);
  }
  std::erase_if(rank_of_, [&](const auto& entry) { return seen.count(entry.first) == 0; });
}

std::optional<uint64_t> RankMemoryWatch::peak(int rank) const {
  auto found = peaks_.find(rank);
  if (found == peaks_.end()) return std::nullopt;
  return found->second;
}

}  // namespace train
