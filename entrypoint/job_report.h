// SageMaker's report files. The first 1024 bytes of output/failure become the job's FailureReason, so the
// first line says in one sentence what failed, and the rest (the failing rank's last error lines) is cut to
// fit. A failure file that already exists (written by user code) is never overwritten; what cannot be a
// reason (a folder, a dangling link) is never taken for one: this run's reason is written, or the log and the
// exit code say that it could not be.
#pragma once

#include "common/atomic_file.h"  // write_file_atomically
#include "common/paths.h"

#include <string>
#include <vector>

namespace train {

constexpr size_t failure_reason_limit = 1024;

// The file's text: `summary`, then as many of the *last* `details` lines as fit in `limit` bytes, cut on
// UTF-8 character boundaries. The summary itself is cut if it alone is too long.
std::string compose_failure_text(const std::string& summary, const std::vector<std::string>& details,
                                 size_t limit = failure_reason_limit);

enum class FailureFile {
  written,        // this run's reason is in output/failure
  jobs_own_kept,  // a file the job wrote itself (or an earlier report of this run) is there, and stays
  not_written,    // nothing SageMaker can read holds this run's reason (said on stderr)
};

// Writes output/failure through a temporary file and link(), so it appears whole or not at all and never
// replaces a file that exists. A symbolic link that leads to no regular file holds no reason: it is replaced.
// Not written (and said on stderr): the earlier run's file that start_job_report could not move aside, a
// folder or anything else that is not a file in its place, a folder that cannot be written.
FailureFile write_failure_file(const JobPaths& paths, const std::string& text);

// Writes this run's failure file (compose_failure_text, write_failure_file) and returns the job's exit code:
// `code`, or exit_code::environment (74) when its reason could not be written where SageMaker reads it.
int report_failure(const JobPaths& paths, const std::string& summary, const std::vector<std::string>& details,
                   int code);

// At the start of a run on a host: creates model/ and output/data/, removes a stale success file and keeps
// an earlier run's failure file (a file, a folder, a link: whatever is in its place) as failure.previous, or
// failure.previous.N when that name holds something it cannot replace: it may hold the only copy of that
// reason. One that cannot be moved at all (a mount point) is said on stderr, and remembered, so that it is
// never taken for this run's reason.
void start_job_report(const JobPaths& paths);

// Writes output/success (empty), atomically.
bool write_success_file(const JobPaths& paths);

}  // namespace train
