// What watches the training loop (runtime/trainer.cpp) without taking part in it: the trainer tells its
// observers at named points, and nothing an observer does changes what is trained (as PyTorch DDP keeps
// its Logger apart from its Reducer). Today the timeline (runtime/timeline_observer.h) is one.
#pragma once

#include "runtime/data/loader/batch_loader.h"

#include <cstdint>

namespace train {

// The stretches of the training thread an observer may time, each between phase_begins and phase_ends.
enum class TrainingPhase { step, stop_vote, log_line, validation, checkpoint };

class TrainingObserver {
 public:
  virtual ~TrainingObserver() = default;

  // Before the first step: `step` steps are done (a resumed job), `total_steps` is the job's last one.
  virtual void training_starts(int64_t step, int64_t total_steps) = 0;
  // The trainer waited from `waited_from` to `arrived` (monotonic_ns) for `batch`.
  virtual void batch_arrived(const data::Batch& batch, int64_t waited_from, int64_t arrived) = 0;
  virtual void phase_begins(TrainingPhase phase) = 0;
  virtual void phase_ends(TrainingPhase phase) = 0;
  // Step `step` is done and voted on (every rank at the same step).
  virtual void step_done(int64_t step) = 0;
  // A log line's or an epoch's end's work is done at `step` (every rank at the same step).
  virtual void pause_done(int64_t step) = 0;
  // Training ends or stops after `step`, before the model or the checkpoint is written (every rank).
  virtual void training_ends(int64_t step) = 0;
};

}  // namespace train
