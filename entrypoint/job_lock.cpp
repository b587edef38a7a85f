#include "entrypoint/job_lock.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <filesystem>
#include <sys/file.h>
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
  // Close-on-exec: mpirun, sshd and the ranks must not hold the lock after the launcher is gone. Never
  // through a link planted under the name.
  bool writable = true;
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0666);
  if (fd < 0 && (errno == EROFS || errno == EACCES || errno == EPERM)) {
    writable = false;  // a read-only output/ still locks an existing file; the folder check names the fault
    fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY);
  }
  if (fd < 0) {
    outcome.warning = fmt::format("cannot lock the job directory with {} ({}); a second train on this directory "
                                  "would not be refused",
                                  path, std::strerror(errno));
    return outcome;
  }
  while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    const int error = errno;
    if (error == EWOULDBLOCK) {
      outcome.refused = fmt::format("the job directory {} is in use by another train ({}): two on one directory "
                                    "would overwrite each other's checkpoints and reports. Wait for it to end, or "
                                    "give this job a directory of its own (SAGEMAKER_BASE_DIR); nothing was written "
                                    "({} holds the lock).",
                                    paths.base.string(), read_holder(fd), path);
    } else {
      outcome.warning = fmt::format("cannot lock the job directory with {} ({}); a second train on this directory "
                                    "would not be refused",
                                    path, std::strerror(error));
    }
    ::close(fd);
    return outcome;
  }
  if (writable) {
    // Written over the last holder's line, then cut to length: a reader sees one line or the other.
    const std::string holder = fmt::format("pid {} on host {}, since {}\n", pid, host, now_utc());
    if (::pwrite(fd, holder.data(), holder.size(), 0) == static_cast<ssize_t>(holder.size())) {
      [[maybe_unused]] const int cut = ::ftruncate(fd, static_cast<off_t>(holder.size()));
    }
  }
  outcome.lock = JobLock(fd);
  return outcome;
}

}  // namespace train
