#include "job/rank_reason.h"

#include "common/atomic_file.h"
#include "common/environment_error.h"
#include "common/temporary_directory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace train {

namespace {

constexpr std::string_view file_prefix = "rank-";
constexpr std::string_view started_prefix = "started-";
constexpr std::string_view folder_prefix = "train-reasons-";

// Where the folders are made: /dev/shm when it is writable, else the temporary folder.
std::filesystem::path folders_parent() {
  if (::access("/dev/shm", W_OK | X_OK) == 0) return "/dev/shm";
  return temporary_directory(current_environment());
}
constexpr std::string_view first_line = "train rank reason 2";

int64_t realtime_ns() {
  timespec now{};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
}

std::optional<RankReason> parse_reason(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != first_line) return std::nullopt;
  RankReason reason;
  int headline = 0;
  if (!std::getline(in, line) ||
      std::sscanf(line.c_str(), "rank=%d exit_code=%d signal=%d written_ns=%" SCNd64 " headline=%d", &reason.rank,
                  &reason.exit_code, &reason.signal, &reason.written_ns, &headline) != 5) {
    return std::nullopt;
  }
  reason.kind = headline != 0 ? RankReasonKind::headline : RankReasonKind::rank;
  while (std::getline(in, line)) reason.lines.push_back(line);
  return reason;
}

}  // namespace

void write_rank_reason(int rank, int exit_code, int signal, std::string_view message, RankReasonKind kind) {
  const char* folder = std::getenv(rank_reasons_variable);
  if (folder == nullptr || *folder == '\0' || rank < 0) return;
  try {
    // Written whole under a temporary name and renamed: the launcher never reads half a reason.
    write_file_atomically(fmt::format("{}/{}{}", folder, file_prefix, rank),
                          fmt::format("{}\nrank={} exit_code={} signal={} written_ns={} headline={}\n{}", first_line,
                                      rank, exit_code, signal, realtime_ns(), kind == RankReasonKind::headline ? 1 : 0,
                                      message));
  } catch (const std::exception&) {
    // No folder here (a rank on another host of the job) or no room: mpirun's relay still carries it.
  }
}

void write_rank_started(int rank) {
  const char* folder = std::getenv(rank_reasons_variable);
  if (folder == nullptr || *folder == '\0' || rank < 0) return;
  const int fd = create_new_file(fmt::format("{}/{}{}", folder, started_prefix, rank));
  if (fd >= 0) ::close(fd);  // its name is the news; a rank on another host has no such folder
}

bool any_rank_started(const std::filesystem::path& folder) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    if (it->path().filename().string().rfind(started_prefix, 0) == 0) return true;
  }
  return false;
}

std::vector<RankReason> read_rank_reasons(const std::filesystem::path& folder) {
  std::vector<RankReason> reasons;
  std::error_code error;
  for (std::filesystem::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(file_prefix, 0) != 0 ||
        name.find_first_not_of("0123456789", file_prefix.size()) != std::string::npos) {
      continue;  // a temporary file of a rank that died while writing, or something else
    }
    std::ifstream in(it->path(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (auto reason = parse_reason(text)) reasons.push_back(std::move(*reason));
  }
  std::sort(reasons.begin(), reasons.end(), [](const RankReason& a, const RankReason& b) {
    return a.written_ns != b.written_ns ? a.written_ns < b.written_ns : a.rank < b.rank;
  });
  return reasons;
}

namespace {

OwnedFolder make_reason_folder() {
  try {
    return OwnedFolder(folders_parent(), folder_prefix);
  } catch (const std::filesystem::filesystem_error& error) {
    throw_file_error("create the folder", error.path1().string(), error.code().value());
  }
}

}  // namespace

RankReasonFolder::RankReasonFolder() : folder_(make_reason_folder()) {}

std::vector<std::filesystem::path> RankReasonFolder::remove_stale() {
  return OwnedFolder::remove_stale(folders_parent(), folder_prefix);
}

EnvironmentMap RankReasonFolder::export_to(EnvironmentMap environment) const {
  environment[rank_reasons_variable] = path().string();
  return environment;
}

}  // namespace train
