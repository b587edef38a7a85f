// The training's report, an observer of the loop (runtime/training_observer.h): the log line every few steps
// (loss, top-1, learning rate, images/s, time left), each rank's timing and straggler warnings
// (runtime/rank_timing.h), each epoch's figures and corrupt-record count, and on rank 0 the files
// (runtime/report_files.h). Every rank takes part in its collectives; rank 0 logs and writes.
#pragma once

#include "runtime/rank_timing.h"
#include "runtime/report_files.h"
#include "runtime/training_clock.h"
#include "runtime/training_context.h"
#include "runtime/training_observer.h"

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace train {

class TrainingReport final : public TrainingObserver {
 public:
  // `clock`: the loop's training clock, read at log lines and epoch ends.
  TrainingReport(const TrainingContext& context, const TrainingClock& clock, int64_t steps_per_epoch);

  void training_starts(int64_t step, int64_t total_steps) override;
  void batch_arrived(const data::Batch* batch, int64_t waited_from, int64_t arrived) override;
  void step_begins(const StepStart& start) override;
  void phase_begins(TrainingPhase phase) override;
  void phase_ends(TrainingPhase phase) override;
  void log_line(int64_t step, int64_t epoch) override;
  void epoch_ends(EpochEnd& end) override;
  void epoch_reported(const EpochEnd& end) override;
  void training_ends(const TrainingEnd& end) override;
  void training_saved(const TrainingEnd& end) override;

 private:
  using clock = std::chrono::steady_clock;
  // A log line: what the host measured at its step; its loss and hits come from the engine later.
  struct ProgressLine {
    int64_t step = 0, epoch = 0, steps = 0;  // steps: since the previous line
    double learning_rate = 0;
    double seconds = 0;                        // the interval's training seconds
    double data_wait = 0, reduction_wait = 0;  // this rank's, on the host clock
    double seconds_since_start = 0;
  };
  void flush_progress();
  void print_progress(const ProgressLine& line);
  void collect_totals(double* reduction_wait = nullptr);
  void report_corrupt(int64_t epoch);
  void write_summary(const std::string& status, int64_t step);

  TrainingContext context_;
  const TrainingClock& clock_;
  int64_t steps_per_epoch_, total_steps_ = 0, steps_at_start_ = 0;
  double learning_rate_ = 0;            // the last step's
  int64_t epoch_corrupt_skipped_ = 0;   // this rank's replaced samples in the current epoch's batches
  // Job-wide sums since the last log line and in this epoch; this rank's own waits since the last log line.
  JobStepSums interval_, epoch_;
  double interval_data_wait_ = 0, interval_reduction_wait_ = 0;
  int64_t interval_first_step_ = 0;  // the step the interval starts after
  double interval_start_seconds_ = 0, epoch_start_seconds_ = 0;  // on the training clock
  clock::time_point vote_started_;
  // The last log line, printed at the next one (or when training pauses or ends): its totals were requested
  // from the engine at its step and are taken an interval later, when the device has long computed them.
  std::optional<ProgressLine> pending_line_;
  std::vector<std::string> rank_hosts_;  // rank 0: every rank's host
  std::optional<StragglerWatch> stragglers_;
  std::optional<ReportFiles> files_;  // rank 0
};

}  // namespace train
