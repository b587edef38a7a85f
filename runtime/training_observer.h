// What the training loop (runtime/trainer.cpp) tells the rest of the rank, at named points. The loop only
// trains; everything else is an observer: the log lines and reports (runtime/training_report.h), the
// validation pass (runtime/validation_pass.h), checkpoints and the model file (runtime/saved_state.h), the
// start-up phases (runtime/startup_observer.h), the timeline (runtime/timeline_observer.h) and the sample log
// (runtime/sample_log.h). Nothing an observer does
// changes what is trained (as PyTorch DDP keeps its Logger apart from its Reducer).
//
// The loop tells its observers in one fixed order (Trainer::run says it). A point that hands a record
// (EpochEnd, TrainingEnd) hands it down that order: an observer may fill in what a later one reads (the
// report the epoch's figures, the validation pass its result). Points marked collective are reached by every
// rank at the same step, so observers may take part in collectives there.
#pragma once

#include "runtime/data/loader/batch_loader.h"
#include "runtime/metrics_summary.h"

#include <cstdint>
#include <optional>
#include <string>

namespace train {

// The stretches of the training thread an observer may time, each between phase_begins and phase_ends.
enum class TrainingPhase { step, stop_vote, log_line, validation, checkpoint };

// A step about to be trained.
struct StepStart {
  int64_t step = 0;  // steps done before it
  const data::Batch& batch;
  bool padding = false;  // Pipe mode: a rank whose share of the epoch is done trains its first batch again
  double learning_rate = 0;
};

// The end of an epoch (or of training part-way through one: then `complete` is false).
struct EpochEnd {
  int64_t epoch = 0, step = 0;
  bool complete = true;
  JobStepSums sums;                      // the epoch's figures: filled by the report
  std::optional<Validation> validation;  // filled by the validation pass (none without a validation channel)
};

// Where a checkpoint is written: after `step` steps, the data resuming at `next`.
struct CheckpointAt {
  int64_t step = 0;
  data::DataPosition next;
  std::string why;
};

// The end of training: finished after the last step, or stopped on request (then `checkpoint` is where).
struct TrainingEnd {
  int64_t step = 0;
  std::optional<CheckpointAt> checkpoint;
  bool stopped() const { return checkpoint.has_value(); }
};

class TrainingObserver {
 public:
  TrainingObserver() = default;
  TrainingObserver(const TrainingObserver&) = delete;  // observers hold references into the trainer
  TrainingObserver& operator=(const TrainingObserver&) = delete;
  virtual ~TrainingObserver() = default;

  // Before the first step (collective): `step` steps are done (a resumed job), `total_steps` is the job's last one.
  virtual void training_starts(int64_t /*step*/, int64_t /*total_steps*/) {}
  // The loop waited from `waited_from` to `arrived` (monotonic_ns) for a training batch; null: the data ended.
  virtual void batch_arrived(const data::Batch* /*batch*/, int64_t /*waited_from*/, int64_t /*arrived*/) {}
  virtual void step_begins(const StepStart& /*start*/) {}
  virtual void phase_begins(TrainingPhase /*phase*/) {}
  virtual void phase_ends(TrainingPhase /*phase*/) {}
  // A log line is due after step `step` of `epoch` (collective, inside the log_line phase).
  virtual void log_line(int64_t /*step*/, int64_t /*epoch*/) {}
  // Step `step` is done and voted on (collective).
  virtual void step_done(int64_t /*step*/) {}

  // The end of an epoch, in four points (collective): its figures, its validation (inside the validation
  // phase), its reports, and a checkpoint when one is due (inside the checkpoint phase).
  virtual void epoch_ends(EpochEnd& /*end*/) {}
  virtual void validate(EpochEnd& /*end*/) {}
  virtual void epoch_reported(const EpochEnd& /*end*/) {}
  virtual void save_checkpoint(const CheckpointAt& /*at*/) {}
  // A log line's or an epoch's end's work is done at `step` (collective).
  virtual void pause_done(int64_t /*step*/) {}

  // The end of training, in three points (collective): the loop is over (nothing written yet); the model or
  // the stop's checkpoint is written; the last reports.
  virtual void training_ends(const TrainingEnd& /*end*/) {}
  virtual void save_result(const TrainingEnd& /*end*/) {}
  virtual void training_saved(const TrainingEnd& /*end*/) {}
};

}  // namespace train
