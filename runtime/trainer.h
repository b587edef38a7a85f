// The training loop of a rank, one for every backend: data and Pipe dealing, epochs, the learning rate,
// metrics, validation, checkpoints and resume, stop requests and the model file. It drives an Engine
// (runtime/engine/engine.h) for everything that touches the model. Every rank runs it; rank 0 logs and writes.
#pragma once

#include "job/job_description.h"
#include "job/rank_environment.h"
#include "runtime/data/loader/batch_loader.h"
#include "runtime/engine/engine.h"
#include "runtime/learning_rate.h"
#include "runtime/metrics_summary.h"
#include "runtime/rank_timing.h"
#include "runtime/tensorboard_writer.h"
#include "runtime/timeline_observer.h"
#include "runtime/training_data.h"
#include "runtime/training_observer.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

namespace train {

class Trainer {
 public:
  Trainer(const JobDescription& job, const RankIdentity& identity, MPI_Comm comm);
  ~Trainer();

  // Returns the rank's exit code: 0 when training finished or stopped on request (after its checkpoint); 128 +
  // the signal when this rank's stop was one the job did not ask for (runtime/stop_request.h).
  // Throws ConfigError for a job it cannot train, DataError for bad data, MpiError for a broken job.
  int run();

 private:
  using clock = std::chrono::steady_clock;

  // trainer.cpp: the loop
  int run_epochs(data::BatchLoader& loader);
  int run_pipe(data::BatchLoader& loader);
  bool pipe_epoch_goes_on(bool in_epoch);  // Pipe mode's vote: does any rank still have a batch of the epoch?
  bool next_batch(data::BatchLoader& loader, data::Batch& batch);
  bool next_training_batch(data::BatchLoader& loader, data::Batch& batch);  // next_batch, its wait timed
  bool train_one_step(const data::Batch& batch, bool padding = false);
  // A log line: what the host measured at its step; its loss and hits come from the engine later.
  struct ProgressLine {
    int64_t step = 0, epoch = 0, steps = 0;  // steps: since the previous line
    double learning_rate = 0;
    double seconds = 0;                      // the interval's training seconds
    double data_wait = 0, reduction_wait = 0;  // this rank's, on the host clock
    double seconds_since_start = 0;
  };
  void log_progress(int64_t epoch);
  void print_progress(const ProgressLine& line);
  void flush_progress();
  void collect_totals(double* reduction_wait = nullptr);
  double training_seconds() const;
  void end_of_epoch(int64_t epoch, bool complete = true);
  void report_corrupt(int64_t epoch);
  std::optional<Validation> validate(int64_t epoch);
  int stop_with_checkpoint(const data::DataPosition& next);
  int finish_training();
  void announce() const;
  // training_report.cpp: what rank 0 writes besides the log: metrics.json, TensorBoard events
  void open_reports();
  void report_interval(const ProgressLine& line, const std::vector<RankTimes>& times);  // interval_: its sums
  void report_epoch(int64_t epoch, const std::optional<Validation>& validation, bool complete);
  void flush_tensorboard();
  void write_summary(const std::string& status);
  void open_sample_log();
  void log_samples(const data::Batch& batch, bool padding);
  std::chrono::milliseconds collective_timeout() const;

  // trainer_state.cpp: what is saved and restored
  void load_initial_weights();
  void resume_if_checkpointed();
  void save_checkpoint(const data::DataPosition& next, const std::string& why);
  void write_model();
  nlohmann::json checkpoint_identity() const;

  TrainingSettings settings_;
  RankIdentity identity_;
  MPI_Comm comm_;
  std::chrono::seconds step_timeout_{900}, data_timeout_{600};
  std::unique_ptr<TrainingData> data_;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> sample_log_{nullptr, &std::fclose};
  data::DataPosition resume_position_;
  int64_t step_ = 0, steps_at_start_ = 0, steps_per_epoch_ = 1, total_steps_ = 0;
  int64_t epoch_corrupt_skipped_ = 0;  // this rank's replaced samples in the current epoch's batches
  LearningRateSchedule schedule_;
  double last_learning_rate_ = 0;
  clock::time_point start_;
  // Job-wide sums since the last log line and in this epoch; this rank's own waits since the last log line.
  JobStepSums interval_, epoch_;
  double interval_data_wait_ = 0, interval_reduction_wait_ = 0;
  int64_t interval_first_step_ = 0;  // step_ at the start of this interval
  // The last log line, printed at the next one (or when training pauses or ends): its totals were requested
  // from the engine at its step and are taken an interval later, when the device has long computed them.
  std::optional<ProgressLine> pending_line_;
  // The training clock: wall time since start_ less the time spent at epoch ends (validation, checkpoints).
  double paused_seconds_ = 0, interval_start_seconds_ = 0, epoch_start_seconds_ = 0;
  std::vector<std::string> rank_hosts_;  // rank 0: every rank's host
  std::optional<StragglerWatch> stragglers_;
  std::optional<MetricsSummary> summary_;            // rank 0
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // rank 0; null when its folder cannot be written
  // What watches the loop, told at its named points (runtime/training_observer.h): the timeline
  // (timeline_steps / TRAIN_TIMELINE; null when off).
  std::unique_ptr<TimelineObserver> timeline_;
  std::vector<TrainingObserver*> observers_;
};

}  // namespace train
