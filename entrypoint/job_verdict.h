// How a job ended, in the words of its report: which rank failed first and how, or that the job was stopped,
// or that mpirun failed on its own, and the exit code that goes with it (docs/faults.md). The launcher
// gathers the facts (mpirun's exit and its messages, the ranks' reason files and error lines, the signals
// it received and when, whether it had to end mpirun itself, the sshd's fate, memory figures) and writes
// what is decided here into output/failure or output/success. Deciding is pure: nothing here reads a file,
// a clock or the process table, so each case is a unit test (tests/unit/entrypoint/test_job_verdict.cpp).
#pragma once

#include "entrypoint/mpirun_outcome.h"
#include "entrypoint/mpirun_signals.h"
#include "job/job_description.h"
#include "job/rank_reason.h"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace train {

// A signal that asked the job to stop (SIGTERM, SIGINT, ...), and when the launcher received it.
struct StopSignal {
  int signal = 0;
  std::chrono::steady_clock::time_point at{};
};

struct JobEndFacts {
  // mpirun's wait status; nullopt when it was never reaped.
  std::optional<int> mpirun_status;
  // What mpirun printed (entrypoint/mpirun_outcome.h): the rank it, or rank-exec, named as failed; the part
  // of its command line it refused; its own words when no rank is to blame.
  MpirunMessages mpirun_messages;
  // The reasons the ranks on this host left in their folder (job/rank_reason.h), earliest first. Ranks on
  // other hosts leave none here: their failure is known from mpirun's output alone.
  std::vector<RankReason> reasons;
  // Each rank's last lines of error output, as relayed (rank-exec's line about how the command ended left out).
  std::map<int, std::vector<std::string>> error_tails;
  // When the launcher first saw a rank failing (a reason in the folder, or mpirun naming a rank) while
  // mpirun still ran.
  std::optional<std::chrono::steady_clock::time_point> failure_seen;
  // The stop signals received, in order (a second one ends the ranks at once).
  std::vector<StopSignal> stop_signals;
  // The signals mpirun received from anything but train, in order (entrypoint/mpirun_signals.h).
  std::vector<MpirunSignal> mpirun_signals;
  // For train's own training: whether its checkpoint file was written after the first stop signal.
  bool checkpoint_after_stop = false;
  // Set when mpirun did not end the job within this long of a rank's failure, so train ended it.
  std::optional<std::chrono::seconds> teardown_forced_after;
  // Set when no rank had started this long after mpirun's start, so train ended mpirun.
  std::optional<std::chrono::seconds> ranks_never_started_after;
  // One sentence when the launcher's companions may have failed the job (an sshd that died for good).
  std::string companion_trouble;
  // Memory, for a rank killed by SIGKILL: the out-of-memory killer's count in this container at the start
  // and at the end of the job, each rank's peak memory as last seen, and the host's memory in words
  // (common/memory_facts.h).
  std::optional<uint64_t> oom_kills_at_start;
  std::optional<uint64_t> oom_kills_at_end;
  std::map<int, uint64_t> rank_peaks;
  std::string host_memory;
};

struct JobVerdict {
  enum class Kind { succeeded, stopped, failed };
  Kind kind = Kind::failed;
  int exit_code = 0;
  // The failure file's first line (for a success, the line the log gets); `details` are the lines below it.
  std::string summary;
  std::vector<std::string> details;
};

JobVerdict decide_job_verdict(const JobDescription& job, const JobEndFacts& facts);

// The job succeeded but output/success could not be written: SageMaker takes a job without it for a failed
// one, so this is a failure of the environment.
JobVerdict success_file_unwritable(const JobPaths& paths);

}  // namespace train
