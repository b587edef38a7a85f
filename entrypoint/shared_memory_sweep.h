// What a job killed outright (SIGKILL, a container's PID 1 killed) leaves in /dev/shm, removed by the next
// job that starts on the host: the launcher's rank-reason folders (job/rank_reason.h) whose launcher has
// ended, and Open MPI's shared-memory segments of this host (vader_segment.HOST.*, 4 MiB per rank) that no
// process maps any more and that are older than a minute (a segment is mapped within moments of being made).
// Never anything of a live job.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

namespace train {

// Removes the leftovers in `shm` (normally /dev/shm) and logs what went; returns it.
std::vector<std::filesystem::path> remove_stale_shared_memory(const std::filesystem::path& shm = "/dev/shm",
                                                              std::chrono::seconds min_age = std::chrono::seconds(60));

}  // namespace train
