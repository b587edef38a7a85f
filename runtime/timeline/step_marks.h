// The moments of a training step that an engine marks for the timeline, and the trace events they make.
//
// Both engines mark the same moments: on the CPU by reading the host's clock where the training thread gets
// there; on the GPU by a device timestamp written in stream order on the stream that does the work (compute,
// copy, communication), put on the host's clock only when the recorded steps are read back. One layout of
// marks per step (StepMarkLayout), one conversion into events (append_step_events), whichever engine took
// them, so what the GPU records is turned into its trace by the code the CPU tests check.
#pragma once

#include "runtime/model/resnet_spec.h"
#include "runtime/timeline/trace_event.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace train::timeline {

// The fixed marks of a step, in the order the compute meets them (the GPU's upload marks are on its copy
// stream).
enum class Mark {
  compute_begin,    // GPU: the compute stream is done with what came before and reaches the step
  forward_begin,    // CPU: the engine starts the step; GPU: the stream has the batch (after its upload)
  forward_end,      // the loss follows
  backward_end,     // every bucket's reduction has been started
  reductions_done,  // the compute has every reduced gradient
  optimizer_end,    // the step is done
  upload_begin,     // GPU: the copy stream starts the batch's upload
  upload_end,
};
inline constexpr size_t fixed_marks = 8;

// Where each mark of a step goes in its row of marks: the fixed ones, each layer group's start in forward
// and in backward, each bucket's reduction's start and end.
struct StepMarkLayout {
  size_t buckets = 0;
  size_t per_step() const { return fixed_marks + 2 * model::layer_groups + 2 * buckets; }
  size_t at(Mark mark) const { return static_cast<size_t>(mark); }
  size_t forward_group(int group) const { return fixed_marks + static_cast<size_t>(group); }
  size_t backward_group(int group) const { return fixed_marks + model::layer_groups + static_cast<size_t>(group); }
  size_t bucket_start(size_t bucket) const { return fixed_marks + 2 * model::layer_groups + 2 * bucket; }
  size_t bucket_end(size_t bucket) const { return bucket_start(bucket) + 1; }
};

// What an engine recorded (StepRecorder::take_recorded_steps, the engine's step observer): a row of marks
// per step on this host's monotonic clock in nanoseconds, 0 where nothing was marked.
struct RecordedSteps {
  StepMarkLayout layout;
  std::vector<int64_t> marks;        // steps() rows of layout.per_step()
  std::vector<size_t> bucket_bytes;  // what each bucket's reduction sends
  size_t upload_bytes = 0;           // GPU: a batch's upload (images and labels)
  bool device = false;               // marked on a GPU
  std::string clock;                 // how the marks were put on the host's clock
  size_t steps() const { return layout.per_step() == 0 ? 0 : marks.size() / layout.per_step(); }
  const int64_t* row(size_t step) const { return marks.data() + step * layout.per_step(); }
};

// Which row and slot a mark goes to while an engine records: the next `steps` steps, one row each.
class StepMarkCursor {
 public:
  void start(StepMarkLayout layout, int64_t steps) {
    layout_ = layout;
    remaining_ = steps;
    row_ = -1;
  }
  // Whether the coming step is recorded; if so, moves to its row (call once per step, at its start).
  bool begin_step() {
    if (remaining_ <= 0) return false;
    --remaining_;
    ++row_;
    return true;
  }
  bool more() const { return remaining_ > 0; }
  size_t rows_begun() const { return static_cast<size_t>(row_ + 1); }
  // The index of `slot` of the current row in a buffer of rows.
  size_t index(size_t slot) const { return static_cast<size_t>(row_) * layout_.per_step() + slot; }
  const StepMarkLayout& layout() const { return layout_; }

 private:
  StepMarkLayout layout_;
  int64_t remaining_ = 0;
  int64_t row_ = -1;
};

// A reading of a device's timer against this host's monotonic clock (the GPU engine's probe).
struct ClockReading {
  int64_t device_ns = 0;            // the device's timer when it was read
  int64_t device_minus_host_ns = 0;
};

// Device times on this host's clock: less device - host, taken from `first` and `last` readings and
// interpolated between them by device time (the clocks may drift apart a little). In whole nanoseconds, so
// that times keep their order (a later device time never maps before an earlier one) and equal times stay
// equal; 0 (not marked) stays 0.
std::vector<int64_t> device_times_on_host(const std::vector<int64_t>& device, const ClockReading& first,
                                          const ClockReading& last);

// The events of the recorded steps, step number `first_step` onwards: on the compute track forward (by layer
// group), loss, backward (by layer group), the wait for the reductions and the optimizer; each bucket's
// reduction on its own track; on the GPU also each step (from the end of the one before, or the stream
// reaching the first) with its wait for input, and the uploads on the copy track. A step whose marks are
// missing or out of order is left out and counted in `*skipped`.
void append_step_events(const RecordedSteps& recorded, int64_t first_step, std::vector<TraceEvent>& events,
                        size_t* skipped);

}  // namespace train::timeline
