#include "runtime/trainer.h"

#include "common/environment_map.h"
#include "common/log.h"
#include "common/non_copyable.h"
#include "common/train_variables.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/sample_log.h"
#include "runtime/startup_observer.h"
#include "runtime/startup_phases.h"
#include "runtime/stop_request.h"
#include "runtime/timeline_observer.h"
#include "runtime/training_report.h"
#include "runtime/validation_pass.h"

#include <fmt/format.h>

#include <algorithm>

namespace train {

namespace {

// A phase of the loop, told to every observer at its start and at its end.
class ObservedPhase : private NonCopyable {
 public:
  ObservedPhase(const std::vector<TrainingObserver*>& observers, TrainingPhase phase)
      : observers_(observers), phase_(phase) {
    for (TrainingObserver* observer : observers_) observer->phase_begins(phase_);
  }
  ~ObservedPhase() {
    for (TrainingObserver* observer : observers_) observer->phase_ends(phase_);
  }

 private:
  const std::vector<TrainingObserver*>& observers_;
  TrainingPhase phase_;
};

}  // namespace

Trainer::Trainer(const JobDescription& job, const RankIdentity& identity, MPI_Comm comm)
    : settings_(derive_training_settings(job, identity)), identity_(identity), comm_(comm) {}

Trainer::~Trainer() = default;

std::chrono::milliseconds Trainer::collective_timeout() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(step_timeout_);
}

// Everything before the loop: the data, the engine and its weights (or a checkpoint's), the observers, the
// batch order; then the loop.
int Trainer::run() {
  const EnvironmentMap environment = current_environment();
  step_timeout_ = read_seconds_variable(environment, IntegerVariable::step_timeout_seconds);
  data_timeout_ = read_seconds_variable(environment, IntegerVariable::data_timeout_seconds);
  data_ = std::make_unique<TrainingData>(settings_, identity_, comm_, collective_timeout(),
                                         std::chrono::duration_cast<std::chrono::milliseconds>(data_timeout_));
  rank_startup_phases().done(StartupPhase::data_index);
  engine_ = make_engine(settings_, data_->classes(), identity_, comm_, collective_timeout());
  engine_->initialize(settings_.seed);
  const TrainingContext context{settings_, identity_, comm_, collective_timeout(), *engine_, *data_};
  auto state = std::make_unique<SavedState>(context);
  if (settings_.weights_dir) state->load_initial_weights();
  data::DataPosition resume_position;
  if (const std::optional<ResumePoint> resume = state->resume_if_checkpointed()) {
    step_ = resume->step;
    resume_position = resume->position;
  }
  rank_startup_phases().done(StartupPhase::model);
  warm_up_communicator(comm_, collective_timeout());
  std::unique_ptr<SampleLog> sample_log = SampleLog::open_if_asked(identity_);
  std::unique_ptr<TimelineObserver> timeline;
  if (settings_.timeline) {
    const timeline::TimelineOptions options{*settings_.timeline, settings_.timeline_dir, settings_.output_dir,
                                            settings_.host, settings_.device == Device::cuda};
    timeline = std::make_unique<TimelineObserver>(
        std::make_unique<timeline::Timeline>(options, identity_, comm_, collective_timeout()), engine_->step_recorder());
  }

  std::unique_ptr<data::BatchLoader> loader =
      data_->open_training(resume_position, timeline ? timeline->loader_observer() : nullptr);
  steps_per_epoch_ = std::max<int64_t>(1, loader->batches_per_epoch());
  total_steps_ = settings_.epochs * steps_per_epoch_;
  if (settings_.max_steps > 0) total_steps_ = std::min(total_steps_, settings_.max_steps);
  schedule_ = make_schedule(settings_, steps_per_epoch_, total_steps_);
  announce();

  // The observers' order: the report first (it closes an epoch's figures before the others act, and prints
  // a pending log line before the timeline ends), the start-up phases before the timeline (which shows them),
  // the validation pass before the saved state (a checkpoint follows the epoch's validation).
  owned_observers_.push_back(std::make_unique<TrainingReport>(context, clock_, steps_per_epoch_));
  owned_observers_.push_back(std::make_unique<StartupObserver>(settings_.host, comm_, collective_timeout()));
  owned_observers_.push_back(std::move(timeline));
  owned_observers_.push_back(std::make_unique<ValidationPass>(context, data_timeout_));
  owned_observers_.push_back(std::move(state));
  owned_observers_.push_back(std::move(sample_log));
  for (const auto& observer : owned_observers_) {
    if (observer) observers_.push_back(observer.get());
  }
  notify(&TrainingObserver::training_starts, step_, total_steps_);
  clock_.start();
  const std::unique_ptr<TrainingBatches> batches =
      make_training_batches(settings_, identity_, comm_, collective_timeout(), data_timeout_, *loader,
                            resume_position, steps_per_epoch_, total_steps_, observers_);
  return train(*batches);
}

// The loop: each step's batch, or the end of an epoch, or the end of training, as the batch order says.
int Trainer::train(TrainingBatches& batches) {
  while (true) {
    const NextStep next = batches.next(step_);
    if (next.ends_epoch) end_epoch(next.epoch, next.complete);
    if (next.ends_training) return end_training(std::nullopt);
    if (next.batch == nullptr) continue;
    const bool stop = train_one_step(*next.batch, next.padding);
    if (stop) return end_training(CheckpointAt{step_, next.after, "stop request"});
  }
}

// One training step of the whole job; returns true when the job agreed to stop after it. The engine's step
// may still be running on the device when this returns: its loss and hits are read only at log lines.
bool Trainer::train_one_step(const data::Batch& batch, bool padding) {
  const double learning_rate = schedule_.at(step_);
  notify(&TrainingObserver::step_begins, StepStart{step_, batch, padding, learning_rate});
  {
    const ObservedPhase phase(observers_, TrainingPhase::step);
    engine_->run_step(batch, learning_rate);  // forward, loss, backward, gradients reduced, weights updated
  }
  ++step_;
  const bool stop = vote_to_stop();
  if (log_line_due(stop)) {
    const ObservedPhase phase(observers_, TrainingPhase::log_line);
    notify(&TrainingObserver::log_line, step_, batch.position.epoch);
    notify(&TrainingObserver::pause_done, step_);
  }
  notify(&TrainingObserver::step_done, step_);
  return stop;
}

// Every rank votes after every step, so all stop at the same one.
bool Trainer::vote_to_stop() {
  const ObservedPhase phase(observers_, TrainingPhase::stop_vote);
  int stop = stop_requested() ? 1 : 0;
  comm::bounded_allreduce(&stop, 1, MPI_INT, MPI_SUM, comm_, collective_timeout(), "the stop vote");
  return stop > 0;
}

bool Trainer::log_line_due(bool stopping) const {
  return step_ <= 5 || step_ % 10 == 0 || step_ == total_steps_ || stopping;
}

// After the last step of `epoch` (or the last step of training, which may end an epoch part-way: then
// `complete` is false and no end-of-epoch checkpoint is written). The training clock stands still meanwhile.
void Trainer::end_epoch(int64_t epoch, bool complete) {
  clock_.pause();
  EpochEnd end{epoch, step_, complete};
  notify(&TrainingObserver::epoch_ends, end);  // the epoch's figures
  {
    const ObservedPhase phase(observers_, TrainingPhase::validation);
    notify(&TrainingObserver::validate, end);
  }
  notify(&TrainingObserver::epoch_reported, end);
  if (complete && settings_.checkpoint_frequency > 0 && (epoch + 1) % settings_.checkpoint_frequency == 0) {
    const ObservedPhase phase(observers_, TrainingPhase::checkpoint);
    notify(&TrainingObserver::save_checkpoint,
           CheckpointAt{step_, data::DataPosition{epoch + 1, 0}, fmt::format("end of epoch {}", epoch)});
  }
  notify(&TrainingObserver::pause_done, step_);
  clock_.resume();
}

// Training is over: finished after the last step (the model is written), or stopped on request (`checkpoint`:
// where a restart resumes). Returns the rank's exit code (runtime/stop_request.h).
int Trainer::end_training(std::optional<CheckpointAt> checkpoint) {
  const TrainingEnd end{step_, std::move(checkpoint)};
  notify(&TrainingObserver::training_ends, end);
  notify(&TrainingObserver::save_result, end);
  notify(&TrainingObserver::training_saved, end);
  return end.stopped() ? exit_code_after_stop(identity_, settings_.host, step_, total_steps_) : 0;
}

void Trainer::announce() const {
  if (identity_.rank != 0) return;
  log_info("training resnet{} ({} parameters) on {}x{} images, {} classes: {} ranks x {} images = global batch {}, "
           "{} steps per epoch, {} steps in all",
           settings_.depth, engine_->plan().spec.parameter_count(), settings_.height, settings_.width,
           data_->classes(), identity_.size, settings_.batch_per_rank, settings_.global_batch, steps_per_epoch_,
           total_steps_);
  log_info("data: {}; peak learning rate {} ({} scaled to global batch {}), {} decay, {} gradient buckets",
           data_->describe(), schedule_.peak, settings_.learning_rate, settings_.global_batch,
           lr_decay_name(settings_.lr_scheduler), engine_->gradient_buckets());
  log_info("engine: {}", engine_->describe());
  log_info("gradient buffers: {:.1f} M values, {}", engine_->plan().gradient_elements() / 1e6,
           settings_.shared_gradient_buffers ? "shared by lifetime (TRAIN_SHARED_GRADIENT_BUFFERS=1)"
                                             : "one per activation");
}

}  // namespace train
