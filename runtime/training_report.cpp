// What the trainer reports besides its log lines: the per-rank timing line and straggler warnings at every
// log line, TensorBoard scalars, and metrics.json (runtime/metrics_summary.h). Rank 0 writes them; every
// rank takes part in gathering the host names. A report that cannot be written is said once in the log and
// given up: training goes on.
#include "runtime/trainer.h"

#include "common/environment_map.h"
#include "common/log.h"

#include <fmt/format.h>

namespace train {

void Trainer::open_reports() {
  stragglers_.emplace(straggler_rule_from_environment(current_environment()));
  rank_hosts_ = gather_host_names(settings_.host, comm_, collective_timeout());
  if (identity_.rank != 0) return;
  summary_.emplace(nlohmann::json{{"num_layers", settings_.depth},
                                  {"image_shape", {3, settings_.height, settings_.width}},
                                  {"num_classes", data_->classes()},
                                  {"ranks", identity_.size},
                                  {"global_batch", settings_.global_batch},
                                  {"steps_per_epoch", steps_per_epoch_},
                                  {"total_steps", total_steps_},
                                  {"engine", engine_->describe()}});
  try {
    tensorboard_ = std::make_unique<TensorBoardWriter>(settings_.tensorboard_dir, settings_.host);
    log_info("TensorBoard events: {}", tensorboard_->path().string());
  } catch (const std::runtime_error& error) {
    log_info("warning: {}; training goes on without TensorBoard events", error.what());
  }
}

// Rank 0, at a log line: the timing line, straggler warnings, and the interval's scalars.
void Trainer::report_interval(const ProgressLine& line, const std::vector<RankTimes>& times) {
  const int64_t step = line.step;
  write_line(1, format_timing_line(step, times, rank_hosts_));
  // The interval holding the first step also holds the start-up (first touches, lazy allocations): no
  // rank is judged by it.
  const bool first_interval = step - line.steps <= steps_at_start_;
  if (!first_interval) {
    for (const auto& warning : stragglers_->observe(times, rank_hosts_)) write_line(2, warning);
  }
  if (!tensorboard_) return;
  double slowest_step = 0, slowest_data_wait = 0;
  for (const auto& t : times) {
    slowest_step = std::max(slowest_step, t.step);
    slowest_data_wait = std::max(slowest_data_wait, t.data_wait);
  }
  tensorboard_->scalar("train/loss", step, interval_.mean_loss());
  tensorboard_->scalar("train/top1", step, interval_.top1());
  tensorboard_->scalar("train/learning_rate", step, line.learning_rate);
  tensorboard_->scalar("train/images_per_sec", step, interval_.images_per_second());
  tensorboard_->scalar("train/epoch", step, static_cast<double>(line.epoch));
  tensorboard_->scalar("time/step_seconds", step, slowest_step);       // the slowest rank's: the job's pace
  tensorboard_->scalar("time/data_wait_seconds", step, slowest_data_wait);
  flush_tensorboard();
}

// Rank 0, at an epoch's end: the epoch's figures into metrics.json, its validation into TensorBoard.
void Trainer::report_epoch(int64_t epoch, const std::optional<Validation>& validation, bool complete) {
  if (identity_.rank != 0) return;
  summary_->add_epoch(epoch, step_, epoch_, validation, complete);
  if (tensorboard_ && validation) {
    tensorboard_->scalar("validation/top1", step_, validation->top1);
    tensorboard_->scalar("validation/top5", step_, validation->top5);
    flush_tensorboard();
  }
  write_summary("training");
}

// The scalars so far onto disk; a writer that fails is given up (said once), training goes on.
void Trainer::flush_tensorboard() {
  try {
    tensorboard_->flush();
  } catch (const std::runtime_error& error) {
    log_info("warning: {}; no more TensorBoard events are written", error.what());
    tensorboard_.reset();
  }
}

void Trainer::write_summary(const std::string& status) {
  if (identity_.rank != 0 || !summary_) return;
  try {
    summary_->write(settings_.output_dir, settings_.metrics_file, status, step_,
                    std::chrono::duration<double>(clock::now() - start_).count());
  } catch (const std::runtime_error& error) {
    log_info("warning: cannot write {}: {}", settings_.metrics_file.string(), error.what());
  }
}

}  // namespace train
