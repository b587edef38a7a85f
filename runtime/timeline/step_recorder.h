// What the timeline asks of whatever runs the training steps (the engine, runtime/engine/engine.h, which
// implements it): to mark the next steps, and to hand their marks over. The timeline knows the steps only
// through it, so it depends on no engine.
#pragma once

#include "runtime/timeline/step_marks.h"

#include <cstdint>

namespace train::timeline {

class StepRecorder {
 public:
  // Marks the moments of the next `steps` steps (step_marks.h): on the CPU from the host's clock, on the
  // GPU by device timestamps on its streams (enqueues; never waits). At most as many steps as the
  // timeline asked for when the recorder was made.
  virtual void record_steps(int64_t steps) = 0;
  // The marks of the steps recorded so far, on this host's monotonic clock, and the end of the recording.
  // Waits for their work: call it well after the last one (an interval later), when that has long run.
  virtual RecordedSteps take_recorded_steps() = 0;

 protected:
  ~StepRecorder() = default;
};

}  // namespace train::timeline
