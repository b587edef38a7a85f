#include "entrypoint/job_report.h"

#include "common/exit_codes.h"
#include "common/log.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <sys/stat.h>

namespace train {

namespace {

// The longest prefix of `text` of at most `limit` bytes that ends on a UTF-8 character boundary.
std::string cut_utf8(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t cut = limit;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return text.substr(0, cut);
}

// The longest suffix of `text` of at most `limit` bytes that starts on a character boundary.
std::string tail_utf8(const std::string& text, size_t limit) {
  if (text.size() <= limit) return text;
  size_t start = text.size() - limit;
  while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
  return text.substr(start);
}

// What a path holds, in a message's words.
std::string kind_of(const struct stat& status) {
  if (S_ISREG(status.st_mode)) return "file";
  if (S_ISDIR(status.st_mode)) return "folder";
  if (S_ISLNK(status.st_mode)) return "symbolic link";
  if (S_ISFIFO(status.st_mode)) return "FIFO";
  if (S_ISSOCK(status.st_mode)) return "socket";
  return "device";
}

// The earlier run's failure file that start_job_report could not move aside (a mount point): the same object
// at output/failure when the job ends is that run's reason, not this one's, nor one the job wrote.
struct Unmoved {
  dev_t device = 0;
  ino_t inode = 0;
  std::string kind;
  std::string error;
};
std::optional<Unmoved> unmoved_failure;

bool is_unmoved(const struct stat& status) {
  return unmoved_failure && unmoved_failure->device == status.st_dev && unmoved_failure->inode == status.st_ino;
}

// Moves `failure` aside: to failure.previous (replacing what rename() may replace there, as an earlier run's
// earlier reason), else to the first free failure.previous.N. Returns the new name, or "" with errno set.
std::string move_aside(const std::filesystem::path& failure) {
  for (int n = 0; n < 100; ++n) {
    std::string target = failure.string() + ".previous" + (n == 0 ? "" : fmt::format(".{}", n));
    struct stat taken {};
    if (n > 0 && ::lstat(target.c_str(), &taken) == 0) continue;
    if (::rename(failure.c_str(), target.c_str()) == 0) return target;
    // Only a name that holds something of another kind (a folder, a full folder) sends it to the next name.
    if (errno != EISDIR && errno != ENOTDIR && errno != ENOTEMPTY && errno != EEXIST) return "";
  }
  errno = EEXIST;
  return "";
}

}  // namespace

std::string compose_failure_text(const std::string& summary, const std::vector<std::string>& details,
                                 size_t limit) {
  std::string text = cut_utf8(summary, limit > 0 ? limit - 1 : 0) + "\n";
  if (details.empty() || text.size() >= limit) return text;
  // Fill from the last detail line backwards: the end of a rank's error output is where the cause is.
  size_t budget = limit - text.size();
  std::vector<std::string> kept;
  for (auto it = details.rbegin(); it != details.rend() && budget > 0; ++it) {
    std::string line = *it + "\n";
    if (line.size() <= budget) {
      kept.push_back(line);
      budget -= line.size();
    } else {
      kept.push_back(tail_utf8(line, budget));
      budget = 0;
    }
  }
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) text += *it;
  return text;
}

FailureFile write_failure_file(const JobPaths& paths, const std::string& text) {
  const std::string path = paths.failure_file().string();
  const auto not_written = [&](const std::string& why) {
    log_error("this run's failure reason could not be written to {}: {}; it is only in this log", path, why);
    return FailureFile::not_written;
  };
  try {
    std::error_code ignored;
    std::filesystem::create_directories(paths.output(), ignored);
    // What is there already decides: nothing, or a link that leads to no file, takes this run's reason.
    struct stat occupant {};
    struct stat followed {};
    const bool occupied = ::lstat(path.c_str(), &occupant) == 0;
    const bool leads_to_a_file = occupied && ::stat(path.c_str(), &followed) == 0 && S_ISREG(followed.st_mode);
    if (occupied && is_unmoved(occupant)) {
      return not_written(fmt::format("it is still the earlier run's {} ({}: {}), which could not be moved aside",
                                     unmoved_failure->kind, path, unmoved_failure->error));
    }
    if (occupied && !S_ISLNK(occupant.st_mode) && !S_ISREG(occupant.st_mode)) {
      return not_written(fmt::format("a {} is in its place", kind_of(occupant)));
    }
    const bool replace_link = occupied && S_ISLNK(occupant.st_mode) && !leads_to_a_file;
    if (occupied && !replace_link) {
      log_info("{} already exists (written by the job itself); leaving it as it is", path);
      return FailureFile::jobs_own_kept;
    }
    AtomicFile file(path);
    file.write(text);
    if (replace_link) {
      file.commit();  // rename() replaces the link itself, never what it names
      log_info("{} was a symbolic link to no file; this run's reason is in its place", path);
      return FailureFile::written;
    }
    // A failure file written by user code meanwhile wins.
    if (!file.commit_unless_present()) {
      log_info("{} already exists (written by the job itself); leaving it as it is", path);
      return FailureFile::jobs_own_kept;
    }
    return FailureFile::written;
  } catch (const std::exception& error) {
    return not_written(error.what());
  }
}

int report_failure(const JobPaths& paths, const std::string& summary, const std::vector<std::string>& details,
                   int code) {
  if (write_failure_file(paths, compose_failure_text(summary, details)) == FailureFile::not_written) {
    return exit_code::environment;
  }
  return code;
}

bool write_success_file(const JobPaths& paths) {
  try {
    std::error_code ignored;
    std::filesystem::create_directories(paths.output(), ignored);
    write_file_atomically(paths.success_file().string(), "");
    return true;
  } catch (const std::exception& error) {
    log_error("cannot write the success file: {}", error.what());
    return false;
  }
}

void start_job_report(const JobPaths& paths) {
  for (const auto& dir : {paths.model(), paths.output_data()}) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) log_error("cannot create {}: {}", dir.string(), error.message());
  }
  std::error_code ignored;
  std::filesystem::remove(paths.success_file(), ignored);
  const auto failure = paths.failure_file();
  struct stat status {};
  if (::lstat(failure.c_str(), &status) != 0 || is_unmoved(status)) return;
  if (const std::string moved = move_aside(failure); !moved.empty()) {
    log_info("moved the failure file of an earlier run to {}", moved);
    return;
  }
  unmoved_failure = Unmoved{status.st_dev, status.st_ino, kind_of(status), std::strerror(errno)};
  log_error("cannot move the failure file of an earlier run (a {}), {}, aside: {}; this run's reason cannot be "
            "written there, and the earlier one is not this run's",
            unmoved_failure->kind, failure.string(), unmoved_failure->error);
}

}  // namespace train
