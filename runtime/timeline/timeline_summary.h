// A rank's summary of its recorded steps: of the step time, the shares spent waiting for data, computing,
// and waiting for gradient reductions that backward did not hide ("exposed communication": whether the
// fused-buffer allreduce overlaps backward). Computed from the trace's own events, so that the file and the
// printed line say the same, and a reader of the file can check it.
//
// A step is an event of category `step`; within it, the counted categories (data_wait, compute,
// exposed_communication) never overlap one another, and whatever time they leave is `other` (on the CPU:
// the trainer's bookkeeping and its log lines; a summary whose other share is large misses something).
// Time in `pause` events (validation, checkpoints) is left out of the steps and of what they count, as the
// training clock of the log lines leaves it out.
#pragma once

#include "runtime/timeline/trace_event.h"

#include <cstdint>
#include <string>
#include <vector>

namespace train::timeline {

struct TimelineSummary {
  int64_t steps = 0;
  double step_seconds = 0;  // the steps' total, pauses left out
  double data_wait_seconds = 0, compute_seconds = 0, exposed_communication_seconds = 0;
  double other_seconds() const {
    return step_seconds - data_wait_seconds - compute_seconds - exposed_communication_seconds;
  }
  double share(double seconds) const { return step_seconds > 0 ? seconds / step_seconds : 0; }
};

TimelineSummary summarize_timeline(const std::vector<TraceEvent>& events);

// "timeline rank=R host=H steps=A-B step_ms=... data_wait=...% compute=...% exposed_communication=...%
// other=...%" (one line per rank on rank 0's log; docs/timeline.md has its regex).
std::string format_summary_line(int rank, const std::string& host, const std::string& steps,
                                const TimelineSummary& summary);

}  // namespace train::timeline
