#include "runtime/training_report.h"

#include "common/environment_map.h"
#include "common/log.h"
#include "runtime/comm/bounded_collectives.h"
#include "runtime/stop_request.h"

#include <fmt/format.h>

#include <algorithm>

namespace train {

namespace {

std::string format_duration(double seconds) {
  auto total = static_cast<int64_t>(std::max(0.0, seconds));
  return fmt::format("{}:{:02}:{:02}", total / 3600, (total / 60) % 60, total % 60);
}

std::string signal_description() {
  int signal_number = stop_signal();
  return signal_number == 0 ? std::string("another rank's signal") : fmt::format("signal {}", signal_number);
}

double seconds_elapsed(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - from).count();
}

}  // namespace

TrainingReport::TrainingReport(const TrainingContext& context, const TrainingClock& clock, int64_t steps_per_epoch)
    : context_(context),
      clock_(clock),
      steps_per_epoch_(steps_per_epoch) {}

void TrainingReport::training_starts(int64_t step, int64_t total_steps) {
  total_steps_ = total_steps;
  steps_at_start_ = interval_first_step_ = step;
  stragglers_.emplace(straggler_rule_from_environment(current_environment()));
  rank_hosts_ = gather_host_names(context_.settings.host, context_.comm, context_.collective_timeout);
  if (context_.identity.rank != 0) return;
  const TrainingSettings& settings = context_.settings;
  files_.emplace(settings, nlohmann::json{{"num_layers", settings.depth},
                                          {"image_shape", {3, settings.height, settings.width}},
                                          {"num_classes", context_.data.classes()},
                                          {"ranks", context_.identity.size},
                                          {"global_batch", settings.global_batch},
                                          {"steps_per_epoch", steps_per_epoch_},
                                          {"total_steps", total_steps_},
                                          {"engine", context_.engine.describe()}});
}

void TrainingReport::batch_arrived(const data::Batch* /*batch*/, int64_t waited_from, int64_t arrived) {
  interval_data_wait_ += static_cast<double>(arrived - waited_from) / 1e9;
}

void TrainingReport::step_begins(const StepStart& start) {
  learning_rate_ = start.learning_rate;
  if (!start.padding) epoch_corrupt_skipped_ += start.batch.corrupt_skipped;
}

// The stop vote waits for the slowest rank too (which of a step's collectives absorbs the wait depends on
// the collective's algorithm and the rank's place in it): it counts as waiting for the others.
void TrainingReport::phase_begins(TrainingPhase phase) {
  if (phase == TrainingPhase::stop_vote) vote_started_ = clock::now();
}

void TrainingReport::phase_ends(TrainingPhase phase) {
  if (phase == TrainingPhase::stop_vote) interval_reduction_wait_ += seconds_elapsed(vote_started_);
}

// A log line at this step: what the host measured now, and a request for the engine's totals, which are
// taken with the previous line's, printed now (collective). The previous line's totals were requested an
// interval ago, before this step's work was queued: the GPU has computed them and goes on with this step
// while they are read, where asking for this step's own would leave it idle after every logged step.
void TrainingReport::log_line(int64_t step, int64_t epoch) {
  context_.engine.request_totals();
  const double trained = clock_.training_seconds();
  const ProgressLine line{step,
                          epoch,
                          step - interval_first_step_,
                          learning_rate_,
                          trained - interval_start_seconds_,
                          interval_data_wait_,
                          interval_reduction_wait_,
                          clock_.wall_seconds()};
  interval_data_wait_ = interval_reduction_wait_ = 0;
  interval_start_seconds_ = trained;
  interval_first_step_ = step;
  flush_progress();
  pending_line_ = line;
}

// The pending log line, if any: printed now (collective).
void TrainingReport::flush_progress() {
  if (!pending_line_) return;
  const ProgressLine line = *pending_line_;
  pending_line_.reset();
  print_progress(line);
}

// The job's loss, top-1 and images/s of a line's interval, and every rank's timing (collective).
void TrainingReport::print_progress(const ProgressLine& line) {
  double reduction_wait = line.reduction_wait;
  collect_totals(&reduction_wait);
  const double steps = static_cast<double>(std::max<int64_t>(1, line.steps));
  const RankTimes mine{line.seconds / steps, line.data_wait / steps, reduction_wait / steps};
  const std::vector<RankTimes> times = gather_rank_times(mine, context_.comm, context_.collective_timeout);
  if (context_.identity.rank == 0) {
    const int64_t steps_run = std::max<int64_t>(1, line.step - steps_at_start_);
    const double per_step = line.seconds_since_start / static_cast<double>(steps_run);
    interval_.seconds = line.seconds;
    write_line(1, fmt::format("step={} epoch={} loss={:.6f} train_top1={:.4f} lr={:.6g} images_per_sec={:.1f} eta={}",
                              line.step, line.epoch, interval_.mean_loss(), interval_.top1(), line.learning_rate,
                              interval_.images_per_second(),
                              format_duration(per_step * static_cast<double>(total_steps_ - line.step))));
    write_line(1, format_timing_line(line.step, times, rank_hosts_));
    // The interval holding the first step also holds the start-up (first touches, lazy allocations): no
    // rank is judged by it.
    if (line.step - line.steps > steps_at_start_) {
      for (const auto& warning : stragglers_->observe(times, rank_hosts_)) write_line(2, warning);
    }
    files_->interval(IntervalFigures{line.step, line.epoch, line.learning_rate, interval_, times});
  }
  interval_ = JobStepSums{};
}

// The engine's oldest requested totals (or, with none requested, those since the last request), summed over
// the job, into this log interval's and this epoch's figures; this rank's reduction wait in those steps is
// added to `*reduction_wait` when given (collective: every rank calls it at the same step).
void TrainingReport::collect_totals(double* reduction_wait) {
  const RankStepSums mine = context_.engine.take_totals();
  if (reduction_wait != nullptr) *reduction_wait += mine.reduction_wait_seconds;
  double sums[3] = {mine.loss, mine.images, mine.correct};
  const auto started = clock::now();
  comm::bounded_allreduce(sums, 3, MPI_DOUBLE, MPI_SUM, context_.comm, context_.collective_timeout, "the step metrics");
  interval_reduction_wait_ += seconds_elapsed(started);  // as the stop vote
  const JobStepSums collected{sums[0], sums[1], sums[2], 0, mine.steps};
  interval_.add(collected);
  epoch_.add(collected);
}

// The epoch's figures into `end` (the training clock is paused by now).
void TrainingReport::epoch_ends(EpochEnd& end) {
  flush_progress();
  collect_totals();  // the steps since the last log line
  epoch_.seconds = clock_.training_seconds() - epoch_start_seconds_;
  if (context_.settings.skip_corrupt) report_corrupt(end.epoch);
  end.sums = epoch_;
}

// skip_corrupt=true: one line per epoch on rank 0 with the job's count (regex: corrupt_records_skipped=(\d+)).
// Records found corrupt while indexing are left out of every epoch; those found when loading were replaced
// in their batch by the next good sample (CorruptSkippingSource) and are counted each time it happens.
void TrainingReport::report_corrupt(int64_t epoch) {
  int64_t counts[2] = {epoch_corrupt_skipped_, context_.data.corrupt_streamed(epoch)};
  epoch_corrupt_skipped_ = 0;
  comm::bounded_allreduce(counts, 2, MPI_INT64_T, MPI_SUM, context_.comm, context_.collective_timeout,
                          "the corrupt-record counts");
  const int64_t in_batches = counts[0];
  const int64_t before_decoding = context_.data.corrupt_at_open() + counts[1];
  if (context_.identity.rank == 0) {
    write_line(1, fmt::format("epoch={} corrupt_records_skipped={} in_batches={} while_indexing={}", epoch,
                              in_batches + before_decoding, in_batches, before_decoding));
  }
}

// Rank 0, after the epoch's validation: its figures into metrics.json, its validation into TensorBoard.
void TrainingReport::epoch_reported(const EpochEnd& end) {
  if (context_.identity.rank == 0) {
    files_->epoch(end.epoch, end.step, end.sums, end.validation, end.complete);
    write_summary("training", end.step);
  }
  epoch_ = JobStepSums{};
  epoch_start_seconds_ = clock_.training_seconds();  // the clock stands still until the next step
}

void TrainingReport::training_ends(const TrainingEnd& /*end*/) { flush_progress(); }

void TrainingReport::training_saved(const TrainingEnd& end) {
  write_summary(end.stopped() ? "stopped" : "finished", end.step);
  if (end.stopped() && context_.identity.rank == 0) {
    write_line(1, fmt::format("stopped at step {} on request ({}); checkpoint written, resume by restarting the job",
                              end.step, signal_description()));
  }
}

void TrainingReport::write_summary(const std::string& status, int64_t step) {
  if (files_) files_->write_summary(status, step, clock_.wall_seconds());
}

}  // namespace train
