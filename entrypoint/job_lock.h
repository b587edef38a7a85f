// One `train` per job directory. Two launchers on one SAGEMAKER_BASE_DIR (0.3 s apart) corrupted each other:
// one's checkpoint clean-up deleted the other's temporary file, and output/ ended with both `success` and
// `failure`. Every launcher (`train`, `train -- CMD`) holds an exclusive lock (flock) on output/.train.lock
// for its whole life; a second one refuses at once (exit 74), naming the holder, and writes nothing.
// `train validate` only reads, so it neither takes the lock nor is refused by it. Each host of a multi-host
// job has its own directory, and locks its own. The lock goes with the process (the kernel releases it
// however the launcher ends); the file stays, naming its last holder.
#pragma once

#include "common/non_copyable.h"
#include "common/paths.h"

#include <optional>
#include <string>

namespace train {

class JobLock : private NonCopyable {
 public:
  JobLock() = default;
  explicit JobLock(int fd) : fd_(fd) {}
  JobLock(JobLock&& other) noexcept;
  JobLock& operator=(JobLock&& other) noexcept;
  ~JobLock();

  bool held() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

struct JobLockOutcome {
  JobLock lock;                 // held unless refused (or no lock could be taken: see `warning`)
  std::optional<std::string> refused;  // why this launcher may not run: another one holds the job directory
  std::optional<std::string> warning;  // the lock file could not be made (a read-only output/: reported later)
};

// Takes the lock of the job in `paths`, recording this process (`pid`, `host`) in the lock file.
JobLockOutcome lock_job_directory(const JobPaths& paths, int pid, const std::string& host);

}  // namespace train
