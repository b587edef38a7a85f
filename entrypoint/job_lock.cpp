#include "entrypoint/job_lock.h"

#include "common/regular_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace train {

namespace {

constexpr const char* lock_file_name = ".train.lock";

std::string now_utc() {
  std::time_t now = std::time(nullptr);
  std::tm parts{};
  ::gmtime_r(&now, &parts);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &parts);
  return text;
}

// The holder's line ("pid 12 on host algo-1, since ..."), or what stands in for it.
std::string read_holder(int fd) {
  char buffer[512];
  const ssize_t got = ::pread(fd, buffer, sizeof buffer - 1, 0);
  std::string text(buffer, got > 0 ? static_cast<size_t>(got) : 0);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  return text.empty() ? std::string("a process that has not said who it is yet") : text;
}

}  // namespace

JobLock::JobLock(JobLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

JobLock& JobLock::operator=(JobLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

JobLock::~JobLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the lock
}

JobLockOutcome lock_job_directory(const JobPaths& paths, int pid, const std::string& host) {
  JobLockOutcome outcome;
  std::error_code ignored;
  std::filesystem::create_directories(paths.output(), ignored);
  const std::string path = (paths.output() / lock_file_name).string();
  // The file is made (or found) through a writable descriptor that is closed again once the holder's line is
  // in it: the lock itself sits on a read-only one, so that holding it keeps no file of output/ open for
  // writing (a read-only remount of output/ must stay possible). Close-on-exec: mpirun, sshd and the ranks
  // must not hold the lock after the launcher is gone. Never through a link planted under the name.
  auto cannot_lock = [&](const std::string& why) {
    outcome.warning = fmt::format("cannot lock the job directory with {} ({}); a second train on this directory "
                                  "would not be refused",
                                  path, why);
    return std::move(outcome);
  };
  // (Non-blocking: a FIFO in the file's place must not hold the launcher in open().)
  const int flags = O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | O_NOCTTY;
  const int writer = ::open(path.c_str(), O_WRONLY | O_CREAT | flags, 0666);
  // A read-only output/ still locks an existing file; the folder check names that fault later.
  const int fd = ::open(path.c_str(), O_RDONLY | flags);
  struct stat status {};
  if (fd < 0 || ::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode)) {
    const std::string why = fd < 0 ? std::strerror(errno) : std::string("it is ") + file_type_name(status.st_mode);
    if (writer >= 0) ::close(writer);
    if (fd >= 0) ::close(fd);
    return cannot_lock(why);
  }
  int locked = 0;
  do {
    locked = ::flock(fd, LOCK_EX | LOCK_NB);
  } while (locked != 0 && errno == EINTR);
  if (locked != 0) {
    const int error = errno;
    if (writer >= 0) ::close(writer);
    if (error != EWOULDBLOCK) {
      ::close(fd);
      return cannot_lock(std::strerror(error));
    }
    outcome.refused = fmt::format("the job directory {} is in use by another train ({}): two on one directory would "
                                  "overwrite each other's checkpoints and reports. Wait for it to end, or give this "
                                  "job a directory of its own (SAGEMAKER_BASE_DIR); nothing was written ({} holds the "
                                  "lock).",
                                  paths.base.string(), read_holder(fd), path);
    ::close(fd);
    return outcome;
  }
  if (writer >= 0) {
    // Written over the last holder's line, then cut to length: a reader sees one line or the other.
    const std::string holder = fmt::format("pid {} on host {}, since {}\n", pid, host, now_utc());
    if (::pwrite(writer, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size())) {
      [[maybe_unused]] const int cut = ::ftruncate(writer, static_cast<off_t>(holder.size()));
    }
    ::close(writer);
  }
  outcome.lock = JobLock(fd);
  return outcome;
}

}  // namespace train
