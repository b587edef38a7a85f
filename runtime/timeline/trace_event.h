// One event of a rank's timeline, on this host's monotonic clock (common/monotonic_clock.h), before it is
// written as Chrome trace-event JSON (trace_json.h). Tracks are the threads of the rank's process in the
// trace; the category says what an event counts as in the summary (timeline_summary.h).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace train::timeline {

enum class TraceCategory {
  step,                   // one training step, the summary's unit (CPU: the trainer's; GPU: the compute stream's)
  data_wait,              // counted: the compute had no batch yet (CPU: the trainer's wait; GPU: the stream's)
  compute,                // counted: forward, loss, backward, optimizer
  exposed_communication,  // counted: waiting for reductions (and the stop vote) after backward
  pause,                  // validation and checkpoints: left out of every step, as the training clock does
  detail,                 // layer groups, buckets, copies, loader pieces: shown, not counted
  host,                   // the host's side of a GPU step (it runs ahead of the device): shown, not counted
  counter,                // a counter sample ("C"): its args are the values
};
const char* category_name(TraceCategory category);

// The tracks of a rank's process.
namespace track {
inline constexpr int trainer = 1;  // the training thread: steps (CPU), data waits, collectives, epoch ends
inline constexpr int copy = 2;     // GPU: the copy stream's uploads
inline constexpr int compute = 3;  // CPU: the training thread's model work; GPU: the compute stream
inline constexpr int counters = 4;
inline constexpr int startup = 5;  // the rank's start-up phases before step 1 (runtime/startup_phases.h)
inline constexpr int bucket(int b) { return 100 + b; }    // a gradient bucket's reductions
inline constexpr int loader(int t) { return 10000 + t; }  // a decoding thread
}  // namespace track
std::string track_name(int track, bool device);

struct TraceEvent {
  std::string name;
  TraceCategory category = TraceCategory::detail;
  int track = track::trainer;
  int64_t begin_ns = 0, end_ns = 0;  // a counter: its time is begin_ns
  std::vector<std::pair<std::string, double>> args;
  int64_t duration_ns() const { return end_ns - begin_ns; }
};

}  // namespace train::timeline
