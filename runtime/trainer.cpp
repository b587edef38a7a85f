#include "runtime/trainer.h"

#include "common/atomic_file.h"
#include "common/config_error.h"
#include "common/environment_map.h"
#include "common/log.h"
#include "common/train_variables.h"
#include "common/monotonic_clock.h"
#include "common/non_copyable.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/comm/replica_check.h"
#include "runtime/data/data_error.h"
#include "runtime/startup_phases.h"
#include "runtime/stop_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <unistd.h>

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

namespace {

std::string format_duration(double seconds) {
  auto total = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{}:{:02}:{:02}", total / 3600, (total / 60) % 60, total % 60);
}

std::string signal_description() {
  int signal_number = stop_signal();
  return signal_number == 0 ? std::string("another rank's signal") : fmt::format("signal {}", signal_number);
}

}  // namespace

Trainer::Trainer(const JobDescription& job, const RankIdentity& identity, MPI_Comm comm)
    : settings_(derive_training_settings(job, identity)), identity_(identity), comm_(comm) {}

Trainer::~Trainer() = default;

std::chrono::milliseconds Trainer::collective_timeout() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(step_timeout_);
}

int Trainer::run() {
  const EnvironmentMap environment = current_environment();
  step_timeout_ = read_seconds_variable(environment, IntegerVariable::step_timeout_seconds);
  data_timeout_ = read_seconds_variable(environment, IntegerVariable::data_timeout_seconds);
  data_ = std::make_unique<TrainingData>(settings_, identity_, comm_, collective_timeout(),
                                         std::chrono::duration_cast<std::chrono::milliseconds>(data_timeout_));
  rank_startup_phases().done(StartupPhase::data_index);
  engine_ = make_engine(settings_, data_->classes(), identity_, comm_, collective_timeout());
  engine_->initialize(settings_.seed);
  if (settings_.weights_dir) load_initial_weights();
  resume_if_checkpointed();
  rank_startup_phases().done(StartupPhase::model);
  warm_up_communicator(comm_, collective_timeout());
  open_sample_log();
  if (settings_.timeline) {
    const timeline::TimelineOptions options{*settings_.timeline, settings_.timeline_dir, settings_.output_dir,
                                            settings_.host, settings_.device == Device::cuda};
    timeline_ = std::make_unique<TimelineObserver>(
        std::make_unique<timeline::Timeline>(options, identity_, comm_, collective_timeout()), engine_->step_recorder());
    observers_.push_back(timeline_.get());
  }

  std::unique_ptr<data::BatchLoader> loader =
      data_->open_training(resume_position_, timeline_ ? timeline_->loader_observer() : nullptr);
  steps_per_epoch_ = std::max<int64_t>(1, loader->batches_per_epoch());
  total_steps_ = settings_.epochs * steps_per_epoch_;
  if (settings_.max_steps > 0) total_steps_ = std::min(total_steps_, settings_.max_steps);
  schedule_ = make_schedule(settings_, steps_per_epoch_, total_steps_);
  announce();
  open_reports();
  start_ = clock::now();
  steps_at_start_ = interval_first_step_ = step_;
  for (TrainingObserver* observer : observers_) observer->training_starts(step_, total_steps_);
  return settings_.pipe ? run_pipe(*loader) : run_epochs(*loader);
}

// File and FastFile mode: every rank's share of an epoch has the same number of batches.
int Trainer::run_epochs(data::BatchLoader& loader) {
  int64_t epoch = resume_position_.epoch;
  data::Batch batch;
  while (step_ < total_steps_) {
    if (!next_training_batch(loader, batch)) break;
    if (batch.position.epoch != epoch) {
      end_of_epoch(epoch);
      epoch = batch.position.epoch;
    }
    epoch_corrupt_skipped_ += batch.corrupt_skipped;
    if (train_one_step(batch)) return stop_with_checkpoint(batch.next);
  }
  // The last epoch ends with the last step (or with max_steps, perhaps part-way).
  end_of_epoch(epoch, /*complete=*/step_ % steps_per_epoch_ == 0);
  return finish_training();
}

// Pipe mode. A rank's share of an epoch is known to be over only when its stream says so, and with
// ShardedByS3Key hosts' streams may differ in length; so before each step the ranks vote: the epoch goes
// on while any rank still has a batch of it, and a rank whose share is done trains its first batch of the
// epoch again meanwhile (its gradient still counts, as DistributedSampler's padding does). The epoch ends
// when no rank has a batch of it left.
int Trainer::run_pipe(data::BatchLoader& loader) {
  if (identity_.rank == 0 && settings_.shuffle) {
    log_info("note: Pipe mode trains on the records in the order the channel streams them; the shuffle "
             "hyperparameter applies to File and FastFile mode (shuffle a Pipe-mode channel with its ShuffleConfig)");
  }
  int64_t epoch = resume_position_.epoch;
  int64_t steps_in_epoch = resume_position_.index / settings_.batch_per_rank;
  data::Batch pending, first;
  bool have_pending = false, have_first = false, last_epoch_closed = false;
  while (settings_.max_steps == 0 || step_ < settings_.max_steps) {
    if (!have_pending) have_pending = next_training_batch(loader, pending);
    const bool in_epoch = have_pending && pending.position.epoch == epoch;
    if (!pipe_epoch_goes_on(in_epoch)) {
      if (identity_.rank == 0 && steps_in_epoch != steps_per_epoch_) {
        log_info("note: Pipe-mode epoch {} took {} steps, but num_training_samples={} implies {}; the learning-rate "
                 "schedule assumes {}: set num_training_samples to the number of records the channel streams",
                 epoch, steps_in_epoch, *settings_.num_training_samples, steps_per_epoch_, steps_per_epoch_);
      }
      end_of_epoch(epoch);
      ++epoch;
      steps_in_epoch = 0;
      have_first = false;
      if (epoch >= settings_.epochs) {
        last_epoch_closed = true;
        break;
      }
      continue;
    }
    const data::Batch* batch = &pending;
    const bool padding = !in_epoch;
    if (in_epoch) {
      if (!have_first) {
        first = pending;
        have_first = true;
      }
      have_pending = false;
      epoch_corrupt_skipped_ += pending.corrupt_skipped;
    } else if (have_first) {
      batch = &first;
    } else {
      throw data::DataError(fmt::format(
          "Pipe-mode channel {}: rank {} received no records in epoch {} while other ranks did: with ShardedByS3Key "
          "every host needs at least one batch per rank ({} records per host here); spread the objects more evenly "
          "over the hosts or use FullyReplicated",
          settings_.pipe_channel, identity_.rank, epoch, int64_t{settings_.batch_per_rank} * identity_.local_size));
    }
    const bool stop = train_one_step(*batch, padding);
    ++steps_in_epoch;
    // Every rank is at the same step of the epoch; a resumed job skips that many batches of each share.
    if (stop) return stop_with_checkpoint(data::DataPosition{epoch, steps_in_epoch * settings_.batch_per_rank});
  }
  if (!last_epoch_closed) end_of_epoch(epoch, /*complete=*/false);
  return finish_training();
}

// Pipe mode's vote before each step (collective): the epoch goes on while any rank still has a batch of it.
bool Trainer::pipe_epoch_goes_on(bool in_epoch) {
  int64_t ranks_with_data = in_epoch ? 1 : 0;
  comm::bounded_allreduce(&ranks_with_data, 1, MPI_INT64_T, MPI_SUM, comm_, collective_timeout(),
                          "the vote on the end of a Pipe-mode epoch");
  return ranks_with_data > 0;
}

// The next batch, waiting for the decoder in bounded slices; false at the end of the data. In Pipe mode the
// host's reader bounds its own waits (for a FIFO to appear, for each next byte) by the same timeout and
// sends its more precise reason to every rank: this wait is longer than those, so that reason comes first.
bool Trainer::next_batch(data::BatchLoader& loader, data::Batch& batch) {
  const std::chrono::seconds limit = data_timeout_ + std::chrono::seconds(settings_.pipe ? 60 : 0);
  const auto deadline = clock::now() + limit;
  while (true) {
    auto status = loader.next(batch, std::chrono::milliseconds(500));
    if (status == data::BatchLoader::Status::batch) return true;
    if (status == data::BatchLoader::Status::end || status == data::BatchLoader::Status::stopped) return false;
    if (clock::now() > deadline) {
      // A read that never returns (a stalled network file system, a FIFO in an image's place) is named.
      const auto stalled = loader.stalled_samples(std::chrono::duration_cast<std::chrono::milliseconds>(limit) / 2);
      throw data::DataTimeout(fmt::format("no training batch arrived within {} s (set TRAIN_DATA_TIMEOUT_SECONDS to "
                                          "wait longer): the data is unreadable or too slow{}",
                                          limit.count(),
                                          stalled.empty() ? std::string()
                                                          : fmt::format("; still reading {}", fmt::join(stalled, "; "))));
    }
  }
}

bool Trainer::next_training_batch(data::BatchLoader& loader, data::Batch& batch) {
  const auto started = clock::now();
  const bool got = next_batch(loader, batch);
  const auto arrived = clock::now();
  interval_data_wait_ += std::chrono::duration<double>(arrived - started).count();
  if (got) {
    rank_startup_phases().done(StartupPhase::first_batch);
    for (TrainingObserver* observer : observers_) observer->batch_arrived(batch, monotonic_ns(started), monotonic_ns(arrived));
  }
  return got;
}

// Seconds of training so far: wall time less the time spent at epoch ends (validation, checkpoints), so
// that images/s and step times are the steps' own.
double Trainer::training_seconds() const {
  return std::chrono::duration<double>(clock::now() - start_).count() - paused_seconds_;
}

// The engine's oldest requested totals (or, with none requested, those since the last request), summed over
// the job, into this log interval's and this epoch's figures; this rank's reduction wait in those steps is
// added to `*reduction_wait` when given (collective: every rank calls it at the same step).
void Trainer::collect_totals(double* reduction_wait) {
  const RankStepSums mine = engine_->take_totals();
  if (reduction_wait != nullptr) *reduction_wait += mine.reduction_wait_seconds;
  double sums[3] = {mine.loss, mine.images, mine.correct};
  const auto started = clock::now();
  comm::bounded_allreduce(sums, 3, MPI_DOUBLE, MPI_SUM, comm_, collective_timeout(), "the step metrics");
  interval_reduction_wait_ += std::chrono::duration<double>(clock::now() - started).count();  // as the stop vote
  const JobStepSums collected{sums[0], sums[1], sums[2], 0, mine.steps};
  interval_.add(collected);
  epoch_.add(collected);
}

// One training step of the whole job; returns true when the job agreed to stop after it. The engine's step
// may still be running on the device when this returns: its loss and hits are read only at log lines.
bool Trainer::train_one_step(const data::Batch& batch, bool padding) {
  if (sample_log_) log_samples(batch, padding);
  last_learning_rate_ = schedule_.at(step_);
  {
    const ObservedPhase phase(observers_, TrainingPhase::step);
    engine_->run_step(batch, last_learning_rate_);
  }
  ++step_;
  // Every rank votes after every step, so all stop at the same one.
  int stop = stop_requested() ? 1 : 0;
  const auto vote_started = clock::now();
  {
    const ObservedPhase phase(observers_, TrainingPhase::stop_vote);
    comm::bounded_allreduce(&stop, 1, MPI_INT, MPI_SUM, comm_, collective_timeout(), "the stop vote");
  }
  // The vote waits for the slowest rank too (which of a step's collectives absorbs the wait depends on the
  // collective's algorithm and the rank's place in it): it counts as waiting for the others.
  interval_reduction_wait_ += std::chrono::duration<double>(clock::now() - vote_started).count();
  if (step_ <= 5 || step_ % 10 == 0 || step_ == total_steps_ || stop > 0) log_progress(batch.position.epoch);
  for (TrainingObserver* observer : observers_) observer->step_done(step_);
  if (step_ == steps_at_start_ + 1) {
    report_startup_phases(settings_.host, comm_, collective_timeout(), timeline_ ? &timeline_->timeline() : nullptr);
  }
  return stop > 0;
}

// A log line at this step: what the host measured now, and a request for the engine's totals, which are
// taken with the previous line's, printed now (collective: every rank calls it at the same step). The
// previous line's totals were requested an interval ago, before this step's work was queued: the GPU has
// computed them and goes on with this step while they are read, where asking for this step's own would
// leave it idle after every logged step.
void Trainer::log_progress(int64_t epoch) {
  const ObservedPhase phase(observers_, TrainingPhase::log_line);
  engine_->request_totals();
  const double trained = training_seconds();
  const auto now = clock::now();
  const ProgressLine line{step_,
                          epoch,
                          step_ - interval_first_step_,
                          last_learning_rate_,
                          trained - interval_start_seconds_,
                          interval_data_wait_,
                          interval_reduction_wait_,
                          std::chrono::duration<double>(now - start_).count()};
  interval_data_wait_ = interval_reduction_wait_ = 0;
  interval_start_seconds_ = trained;
  interval_first_step_ = step_;
  flush_progress();
  pending_line_ = line;
  for (TrainingObserver* observer : observers_) observer->pause_done(step_);
}

// The pending log line, if any: printed now (collective).
void Trainer::flush_progress() {
  if (!pending_line_) return;
  const ProgressLine line = *pending_line_;
  pending_line_.reset();
  print_progress(line);
}

// The job's loss, top-1 and images/s of a line's interval, and every rank's timing (collective).
void Trainer::print_progress(const ProgressLine& line) {
  double reduction_wait = line.reduction_wait;
  collect_totals(&reduction_wait);
  const double steps = static_cast<double>(std::max<int64_t>(1, line.steps));
  const RankTimes mine{line.seconds / steps, line.data_wait / steps, reduction_wait / steps};
  const std::vector<RankTimes> times = gather_rank_times(mine, comm_, collective_timeout());
  if (identity_.rank == 0) {
    const double per_step = line.seconds_since_start / static_cast<double>(std::max<int64_t>(1, line.step - steps_at_start_));
    interval_.seconds = line.seconds;
    write_line(1, fmt::format("step={} epoch={} loss={:.6f} train_top1={:.4f} lr={:.6g} images_per_sec={:.1f} eta={}",
                              line.step, line.epoch, interval_.mean_loss(), interval_.top1(), line.learning_rate,
                              interval_.images_per_second(),
                              format_duration(per_step * static_cast<double>(total_steps_ - line.step))));
    report_interval(line, times);
  }
  interval_ = JobStepSums{};
}

// The job agreed to stop (a signal): a checkpoint at `next`, then exit 0 (the launcher reports the signal), or
// the failure of a stop the job did not ask for (runtime/stop_request.h).
int Trainer::stop_with_checkpoint(const data::DataPosition& next) {
  flush_progress();
  for (TrainingObserver* observer : observers_) observer->training_ends(step_);
  save_checkpoint(next, "stop request");
  write_summary("stopped");
  if (identity_.rank == 0) {
    write_line(1, fmt::format("stopped at step {} on request ({}); checkpoint written, resume by restarting the job",
                              step_, signal_description()));
  }
  return exit_code_after_stop(identity_, settings_.host, step_, total_steps_);
}

// After the last step: every rank must hold the same parameters, then rank 0 writes the model.
int Trainer::finish_training() {
  for (TrainingObserver* observer : observers_) observer->training_ends(step_);
  const std::vector<float> parameters = engine_->parameters();
  comm::check_replicas_agree(parameters.data(), parameters.size(), identity_, comm_, collective_timeout());
  write_model();
  write_summary("finished");
  return 0;
}

// After the last step of `epoch` (or the last step of training, which may end an epoch part-way: then
// `complete` is false and no end-of-epoch checkpoint is written).
void Trainer::end_of_epoch(int64_t epoch, bool complete) {
  flush_progress();
  collect_totals();  // the steps since the last log line
  epoch_.seconds = training_seconds() - epoch_start_seconds_;
  const auto paused_at = clock::now();  // the training clock stops for validation and checkpoints
  if (settings_.skip_corrupt) report_corrupt(epoch);
  std::optional<Validation> validation;
  {
    const ObservedPhase phase(observers_, TrainingPhase::validation);
    validation = validate(epoch);
  }
  report_epoch(epoch, validation, complete);
  if (complete && settings_.checkpoint_frequency > 0 && (epoch + 1) % settings_.checkpoint_frequency == 0) {
    const ObservedPhase phase(observers_, TrainingPhase::checkpoint);
    save_checkpoint(data::DataPosition{epoch + 1, 0}, fmt::format("end of epoch {}", epoch));
  }
  for (TrainingObserver* observer : observers_) observer->pause_done(step_);
  paused_seconds_ += std::chrono::duration<double>(clock::now() - paused_at).count();
  epoch_ = JobStepSums{};
  epoch_start_seconds_ = training_seconds();
}

// skip_corrupt=true: one line per epoch on rank 0 with the job's count (regex: corrupt_records_skipped=(\d+)).
// Records found corrupt while indexing are left out of every epoch; those found when loading were replaced
// in their batch by the next good sample (CorruptSkippingSource) and are counted each time it happens.
void Trainer::report_corrupt(int64_t epoch) {
  int64_t counts[2] = {epoch_corrupt_skipped_, data_->corrupt_streamed(epoch)};
  epoch_corrupt_skipped_ = 0;
  comm::bounded_allreduce(counts, 2, MPI_INT64_T, MPI_SUM, comm_, collective_timeout(), "the corrupt-record counts");
  const int64_t in_batches = counts[0];
  const int64_t before_decoding = data_->corrupt_at_open() + counts[1];
  if (identity_.rank == 0) {
    write_line(1, fmt::format("epoch={} corrupt_records_skipped={} in_batches={} while_indexing={}", epoch,
                              in_batches + before_decoding, in_batches, before_decoding));
  }
}

// Top-1 and top-5 of the model in inference mode over the validation channel (each image counted once);
// nullopt without a validation channel.
std::optional<Validation> Trainer::validate(int64_t epoch) {
  std::unique_ptr<data::BatchLoader> loader = data_->open_validation();
  if (!loader) return std::nullopt;
  const int classes = data_->classes();
  std::vector<float> logits(static_cast<size_t>(settings_.batch_per_rank) * static_cast<size_t>(classes));
  double counts[3] = {0, 0, 0};  // images, top-1 hits, top-5 hits
  data::Batch batch;
  const int64_t dataset = data_->validation_samples();
  while (next_batch(*loader, batch)) {
    engine_->infer(batch, logits.data());
    for (int i = 0; i < batch.size; ++i) {
      // Samples that pad the last ranks' shards repeat earlier ones: count every image once.
      const int64_t global_position = identity_.rank + identity_.size * (batch.position.index + i);
      if (global_position >= dataset) continue;
      const float* row = logits.data() + static_cast<int64_t>(i) * classes;
      const float truth = row[batch.labels[static_cast<size_t>(i)]];
      int better = 0;
      for (int c = 0; c < classes; ++c) better += row[c] > truth ? 1 : 0;
      counts[0] += 1;
      counts[1] += better == 0 ? 1 : 0;
      counts[2] += better < 5 ? 1 : 0;
    }
  }
  comm::bounded_allreduce(counts, 3, MPI_DOUBLE, MPI_SUM, comm_, collective_timeout(), "the validation counts");
  const Validation result{counts[1] / std::max(1.0, counts[0]), counts[2] / std::max(1.0, counts[0]),
                          static_cast<int64_t>(counts[0])};
  if (identity_.rank == 0) {
    write_line(1, fmt::format("epoch={} validation_top1={:.4f} validation_top5={:.4f} validation_images={}", epoch,
                              result.top1, result.top5, result.images));
  }
  return result;
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

// TRAIN_SAMPLE_LOG=DIR: every rank appends one line per step to DIR/rank-R.txt naming the samples it
// trained on (a diagnostic: the tests check with it that every sample is used once per epoch).
void Trainer::open_sample_log() {
  auto dir = lookup(current_environment(), "TRAIN_SAMPLE_LOG");
  if (!dir || dir->empty()) return;
  const auto path = std::filesystem::path(*dir) / fmt::format("rank-{}.txt", identity_.rank);
  const int fd = open_file_for_appending(path.string());
  if (fd >= 0) sample_log_.reset(::fdopen(fd, "a"));
  if (!sample_log_) {
    const int error = errno;
    if (fd >= 0) ::close(fd);
    throw ConfigError(fmt::format("TRAIN_SAMPLE_LOG: cannot append to {}: {}", path.string(), std::strerror(error)));
  }
}

void Trainer::log_samples(const data::Batch& batch, bool padding) {
  fmt::print(sample_log_.get(), "epoch={} step={} padding={} labels={} samples={} repeats={}\n",
             batch.position.epoch, step_, padding ? 1 : 0, fmt::join(batch.labels, ","),
             fmt::join(batch.samples, ","), fmt::join(batch.repeats, ","));
  std::fflush(sample_log_.get());
}

}  // namespace train
