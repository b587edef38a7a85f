// A failing rank's own account of why it fails, left where its host's launcher reads it. mpirun relays a
// rank's "[train] error: ..." line and names the failing rank only when it gets to before the job is torn
// down, which an abort often prevents; so a rank that fails also writes its exit code and reason into a
// folder the launcher made for the job (named by TRAIN_RANK_REASONS, in /dev/shm when there is one), before
// it aborts, and the launcher reads that folder first. Ranks on other hosts of a multi-host job do not
// have the master's folder; their reasons come from mpirun's relay alone.
#pragma once

#include "common/environment_map.h"
#include "common/owned_folder.h"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace train {

constexpr const char* rank_reasons_variable = "TRAIN_RANK_REASONS";

// What the reason's first line is: the rank's own error (the report says "Rank R of N on host H exited with
// code C." above it), or a sentence about the whole job that is the report's first line itself (a stop the job
// did not ask for, hosts whose job descriptions differ).
enum class RankReasonKind { rank, headline };

struct RankReason {
  int rank = -1;
  int exit_code = 0;              // the code the rank ends with (when signal is 0)
  int signal = 0;                 // the signal its command was killed by (`train -- CMD`), else 0
  int64_t written_ns = 0;         // CLOCK_REALTIME when written: the earliest reason is the first failure
  std::vector<std::string> lines;  // the message, line by line; empty when the rank had none of its own
  RankReasonKind kind = RankReasonKind::rank;
};

// Writes `rank`'s reason into the folder $TRAIN_RANK_REASONS names, if it names one. Best effort (the rank
// is about to abort, and anything that fails here only loses this copy of the reason): never throws.
void write_rank_reason(int rank, int exit_code, int signal, std::string_view message,
                       RankReasonKind kind = RankReasonKind::rank);

// A rank on the launcher's host says it has started, in the same folder (`started-R`): train's rank once every
// rank has joined the job (after the first allreduce), rank-exec once the command runs. The launcher's bounded
// wait for the ranks to start ends at the first (entrypoint/launcher.cpp). Best effort, never throws.
void write_rank_started(int rank);
bool any_rank_started(const std::filesystem::path& folder);

// Every reason in `folder`, earliest first (then by rank); files that are not reasons are skipped.
std::vector<RankReason> read_rank_reasons(const std::filesystem::path& folder);

// The folder a launcher makes for its ranks' reasons (in /dev/shm when it is writable, else in $TMPDIR or
// /tmp), removed with its content when this goes. Its name holds the launcher's pid, and its `owner` file
// the launcher's identity (common/process_identity.h), so that a later launcher can tell the folder of one
// that was killed (SIGKILL leaves it behind) from a live job's. Throws EnvironmentError when none can be made.
class RankReasonFolder {
 public:
  RankReasonFolder();
  // Removes the folders of launchers that have ended (never a live one's, nor one of another PID namespace
  // sharing the folder); returns them.
  static std::vector<std::filesystem::path> remove_stale();
  const std::filesystem::path& path() const { return folder_.path(); }
  // `environment` with TRAIN_RANK_REASONS naming this folder.
  EnvironmentMap export_to(EnvironmentMap environment) const;

 private:
  OwnedFolder folder_;
};

}  // namespace train
