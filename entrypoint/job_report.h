// SageMaker's report files. The first 1024 bytes of output/failure become the job's FailureReason, so the
// first line says in one sentence what failed, and the rest (the failing rank's last error lines) is cut to
// fit. A failure file that already exists (written by user code) is never overwritten.
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

// Writes output/failure through a temporary file and link(), so it appears whole or not at all and never
// replaces an existing one. Returns false (and says why on stderr) when it did not write.
bool write_failure_file(const JobPaths& paths, const std::string& text);

// At the start of a run on a host: creates model/ and output/data/, removes a stale success file and keeps
// an earlier run's failure file as failure.previous (it may hold the only copy of that reason).
void start_job_report(const JobPaths& paths);

// Writes output/success (empty), atomically.
bool write_success_file(const JobPaths& paths);

}  // namespace train
