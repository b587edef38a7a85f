// The process limits a job needs, checked on every host before anything starts: open files (RLIMIT_NOFILE:
// with `ulimit -n 24` mpirun ran out of descriptors and hung) and a file's size (RLIMIT_FSIZE: a checkpoint
// larger than it killed the rank with SIGXFSZ). A soft limit below the need is raised to the hard limit when
// that is enough (ranks, mpirun and sshd inherit it); a hard limit below the need is refused with what to do
// (docs/faults.md, exit 74).
#pragma once

#include "job/job_description.h"

#include <cstdint>
#include <optional>
#include <string>
#include <sys/resource.h>

namespace train {

struct LimitNeed {
  int resource = RLIMIT_NOFILE;  // RLIMIT_NOFILE or RLIMIT_FSIZE
  uint64_t least = 0;            // descriptors, or bytes
  std::string who;               // who needs it: "mpirun and 2 ranks on each of 1 host", "ResNet-18's checkpoint"
};

// Open files: mpirun's pipes and sockets for this host's ranks and its connections to the other hosts, the
// ranks' own files and sockets. Measured here with train's own 2-step jobs: mpirun needed 36 descriptors for 2
// ranks, 44 for 4 and 64 for 8 on one host; the need is that with room to spare.
LimitNeed open_files_need(const JobDescription& job);

// A file's size: the largest file train writes for the job (`checkpoint_bytes`, train's own training), on the
// master (rank 0 writes it); nullopt elsewhere, and for a user's command, whose files train cannot know.
std::optional<LimitNeed> file_size_need(const JobDescription& job, std::optional<uint64_t> checkpoint_bytes);

struct LimitDecision {
  std::optional<rlim_t> raise_soft_to;  // the hard limit, when the soft one is too low and the hard one enough
  std::optional<std::string> refusal;   // the message, when the hard limit itself is too low
};

// Pure: what to do about `need` with these limits.
LimitDecision decide_limit(const LimitNeed& need, rlim_t soft, rlim_t hard);

// Reads the limits, raises the soft ones that need it (saying so on stderr) and returns the first refusal.
std::optional<std::string> apply_limits(const LimitNeed& open_files, const std::optional<LimitNeed>& file_size);

}  // namespace train
