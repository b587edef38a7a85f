#include "entrypoint/shared_memory_sweep.h"

#include "common/log.h"
#include "entrypoint/descendants.h"
#include "job/cluster.h"
#include "job/rank_reason.h"

#include <fmt/format.h>

#include <fstream>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace train {
namespace {

// Every file under `shm` that some process we can see maps (its /proc/PID/maps names it).
std::set<std::string> mapped_files(const std::filesystem::path& shm) {
  std::set<std::string> mapped;
  const std::string prefix = shm.string() + "/";
  for (pid_t pid : all_process_ids()) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(in, line);) {
      const auto at = line.find(prefix);
      if (at == std::string::npos) continue;
      std::string path = line.substr(at);
      if (const auto deleted = path.rfind(" (deleted)"); deleted != std::string::npos) path.resize(deleted);
      mapped.insert(path);
    }
  }
  return mapped;
}

}  // namespace

std::vector<std::filesystem::path> remove_stale_shared_memory(const std::filesystem::path& shm,
                                                              std::chrono::seconds min_age) {
  std::vector<std::filesystem::path> removed;
  if (shm == "/dev/shm") removed = RankReasonFolder::remove_stale();

  const std::string host = local_host_name();
  const std::string segment_prefix = "vader_segment." + host + ".";
  std::vector<std::filesystem::path> candidates;
  std::error_code error;
  const auto now = std::chrono::system_clock::now();
  for (std::filesystem::directory_iterator it(shm, error), end; !host.empty() && !error && it != end; it.increment(error)) {
    if (it->path().filename().string().rfind(segment_prefix, 0) != 0) continue;
    struct stat status {};
    if (::lstat(it->path().c_str(), &status) != 0 || !S_ISREG(status.st_mode)) continue;
    const auto modified = std::chrono::system_clock::time_point(std::chrono::seconds(status.st_mtim.tv_sec));
    if (now - modified < min_age) continue;  // perhaps a starting job's, not mapped yet
    candidates.push_back(it->path());
  }
  if (!candidates.empty()) {
    const auto mapped = mapped_files(shm);
    for (const auto& path : candidates) {
      if (mapped.count(path.string()) == 0 && ::unlink(path.c_str()) == 0) removed.push_back(path);
    }
  }
  if (!removed.empty()) {
    std::vector<std::string> names;
    for (const auto& path : removed) names.push_back(path.filename().string());
    log_info("removed {} item(s) of shared memory left by jobs that were killed: {}", removed.size(),
             fmt::join(names, ", "));
  }
  return removed;
}

}  // namespace train
