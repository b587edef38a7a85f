// Chrome trace-event JSON (the "JSON Object Format" of the Trace Event Format that chrome://tracing and
// Perfetto's UI open): a rank is a process (pid = rank), a track a thread of it, named by metadata events;
// spans are complete events ("X"), counters "C". Times are microseconds from the job's origin, on rank 0's
// clock: a rank's monotonic nanoseconds plus its clock offset (clock_alignment.h).
#pragma once

#include "runtime/timeline/trace_event.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace train::timeline {

struct TraceClock {
  int64_t offset_ns = 0;  // added to this rank's monotonic time gives rank 0's
  int64_t origin_ns = 0;  // rank 0's monotonic time that is trace time 0
};

// One rank's part of traceEvents: its process and track names, then its events, comma-separated (no
// brackets), so that ranks' parts join into one document.
std::string trace_events_json(const std::vector<TraceEvent>& events, int rank, const std::string& process_name,
                              const TraceClock& clock, bool device);

// A whole trace document from ranks' parts, with `other_data` as its "otherData" (shown by the viewers as
// the trace's metadata).
std::string trace_document(const std::vector<std::string>& parts, const nlohmann::json& other_data);

}  // namespace train::timeline
