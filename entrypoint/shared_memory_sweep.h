// What a job killed outright (SIGKILL, a container's PID 1 killed) or a killed mpirun leaves, removed by the
// next job that starts on the host: in /dev/shm the launcher's rank-reason folders (job/rank_reason.h) whose
// launcher has ended, and Open MPI's shared-memory segments of this host (vader_segment.HOST.*, 4 MiB per
// rank) that no process maps any more and that are older than a minute (a segment is mapped within moments of
// being made); in the temporary folder, mpirun's session folders of this host and user
// (ompi.HOST.UID/pid.MPIRUN: its hwloc topology, PMIx's stores) whose mpirun is gone (no process has that
// pid), none of whose files a process maps, and that are older than a minute. Never anything of a live job
// that this process can see (a process in a PID namespace beside ours is not seen: as for the segments, the
// minute is what protects its files).
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace train {

// Removes the leftovers in `shm` (normally /dev/shm) and under `temporary` (Open MPI's session folders' base:
// OMPI_MCA_orte_tmpdir_base, else $TMPDIR, else /tmp, when not given) and logs what went; returns it.
std::vector<std::filesystem::path> remove_stale_shared_memory(
    const std::filesystem::path& shm = "/dev/shm", std::chrono::seconds min_age = std::chrono::seconds(60),
    const std::optional<std::filesystem::path>& temporary = std::nullopt);

}  // namespace train
