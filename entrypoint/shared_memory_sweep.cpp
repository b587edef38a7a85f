#include "entrypoint/shared_memory_sweep.h"

#include "common/environment_map.h"
#include "common/log.h"
#include "common/temporary_directory.h"
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

// Every file under `root` that some process we can see maps (its /proc/PID/maps names it).
std::set<std::string> mapped_files(const std::filesystem::path& root) {
  std::set<std::string> mapped;
  const std::string prefix = root.string() + "/";
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

bool older_than(const struct stat& status, std::chrono::seconds min_age) {
  const auto modified = std::chrono::system_clock::time_point(std::chrono::seconds(status.st_mtim.tv_sec));
  return std::chrono::system_clock::now() - modified >= min_age;
}

// Where mpirun makes its session folders: its orte_tmpdir_base, else the job's temporary folder.
std::filesystem::path open_mpi_session_base() {
  const EnvironmentMap environment = current_environment();
  if (auto base = lookup(environment, "OMPI_MCA_orte_tmpdir_base"); base && !base->empty()) return *base;
  return temporary_directory(environment);
}

// mpirun's session folder is pid.N, N its pid: gone when no process has that pid. (A worker's daemon names its
// folder by job family, jf.N, which says nothing of whether it runs: those are left alone.)
bool mpirun_gone(const std::string& name) {
  if (name.rfind("pid.", 0) != 0) return false;
  const std::string pid = name.substr(4);
  if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos) return false;
  return ::access(("/proc/" + pid).c_str(), F_OK) != 0;
}

// The session folders under `base`/ompi.HOST.UID whose mpirun is gone, none of whose files are mapped.
std::vector<std::filesystem::path> remove_stale_session_folders(const std::filesystem::path& base,
                                                                std::chrono::seconds min_age) {
  const std::string host = local_host_name();
  const uid_t uid = ::getuid();
  const std::filesystem::path top = base / ("ompi." + host + "." + std::to_string(uid));
  struct stat status {};
  if (host.empty() || ::lstat(top.c_str(), &status) != 0 || !S_ISDIR(status.st_mode) || status.st_uid != uid) {
    return {};
  }
  std::vector<std::filesystem::path> candidates;
  std::error_code error;
  for (std::filesystem::directory_iterator it(top, error), end; !error && it != end; it.increment(error)) {
    struct stat folder {};
    if (::lstat(it->path().c_str(), &folder) != 0 || !S_ISDIR(folder.st_mode) || folder.st_uid != uid) continue;
    if (!older_than(folder, min_age)) continue;  // perhaps a starting job's
    if (mpirun_gone(it->path().filename().string())) candidates.push_back(it->path());
  }
  std::vector<std::filesystem::path> removed;
  if (candidates.empty()) return removed;
  const auto mapped = mapped_files(top);
  for (const auto& folder : candidates) {
    const std::string prefix = folder.string() + "/";
    const auto held = mapped.lower_bound(prefix);
    if (held != mapped.end() && held->compare(0, prefix.size(), prefix) == 0) continue;  // a live job's after all
    std::error_code ignored;
    if (std::filesystem::remove_all(folder, ignored) > 0 && !ignored) removed.push_back(folder);
  }
  if (!removed.empty()) {
    std::vector<std::string> names;
    for (const auto& path : removed) names.push_back(path.string());
    log_info("removed {} Open MPI session folder(s) left by jobs whose mpirun was killed: {}", removed.size(),
             fmt::join(names, ", "));
  }
  return removed;
}

}  // namespace

std::vector<std::filesystem::path> remove_stale_shared_memory(const std::filesystem::path& shm,
                                                              std::chrono::seconds min_age,
                                                              const std::optional<std::filesystem::path>& temporary) {
  std::vector<std::filesystem::path> removed;
  if (shm == "/dev/shm") removed = RankReasonFolder::remove_stale();

  const std::string host = local_host_name();
  const std::string segment_prefix = "vader_segment." + host + ".";
  std::vector<std::filesystem::path> candidates;
  std::error_code error;
  for (std::filesystem::directory_iterator it(shm, error), end; !host.empty() && !error && it != end; it.increment(error)) {
    if (it->path().filename().string().rfind(segment_prefix, 0) != 0) continue;
    struct stat status {};
    if (::lstat(it->path().c_str(), &status) != 0 || !S_ISREG(status.st_mode)) continue;
    if (!older_than(status, min_age)) continue;  // perhaps a starting job's, not mapped yet
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
  for (auto& folder : remove_stale_session_folders(temporary ? *temporary : open_mpi_session_base(), min_age)) {
    removed.push_back(std::move(folder));
  }
  return removed;
}

}  // namespace train
