#include "runtime/report_files.h"

#include "common/log.h"

#include <algorithm>

namespace train {

ReportFiles::ReportFiles(const TrainingSettings& settings, nlohmann::json job)
    : settings_(settings), summary_(std::move(job)) {
  try {
    tensorboard_ = std::make_unique<TensorBoardWriter>(settings_.tensorboard_dir, settings_.host);
    log_info("TensorBoard events: {}", tensorboard_->path().string());
  } catch (const std::runtime_error& error) {
    log_info("warning: {}; training goes on without TensorBoard events", error.what());
  }
}

void ReportFiles::interval(const IntervalFigures& figures) {
  if (!tensorboard_) return;
  double slowest_step = 0, slowest_data_wait = 0;
  for (const auto& t : figures.times) {
    slowest_step = std::max(slowest_step, t.step);
    slowest_data_wait = std::max(slowest_data_wait, t.data_wait);
  }
  const int64_t step = figures.step;
  tensorboard_->scalar("train/loss", step, figures.sums.mean_loss());
  tensorboard_->scalar("train/top1", step, figures.sums.top1());
  tensorboard_->scalar("train/learning_rate", step, figures.learning_rate);
  tensorboard_->scalar("train/images_per_sec", step, figures.sums.images_per_second());
  tensorboard_->scalar("train/epoch", step, static_cast<double>(figures.epoch));
  tensorboard_->scalar("time/step_seconds", step, slowest_step);  // the slowest rank's: the job's pace
  tensorboard_->scalar("time/data_wait_seconds", step, slowest_data_wait);
  flush_tensorboard();
}

void ReportFiles::epoch(int64_t epoch, int64_t step, const JobStepSums& sums,
                        const std::optional<Validation>& validation, bool complete) {
  summary_.add_epoch(epoch, step, sums, validation, complete);
  if (tensorboard_ && validation) {
    tensorboard_->scalar("validation/top1", step, validation->top1);
    tensorboard_->scalar("validation/top5", step, validation->top5);
    flush_tensorboard();
  }
}

// The scalars so far onto disk; a writer that fails is given up (said once), training goes on.
void ReportFiles::flush_tensorboard() {
  try {
    tensorboard_->flush();
  } catch (const std::runtime_error& error) {
    log_info("warning: {}; no more TensorBoard events are written", error.what());
    tensorboard_.reset();
  }
}

void ReportFiles::write_summary(const std::string& status, int64_t step, double wall_seconds) {
  try {
    summary_.write(settings_.output_dir, settings_.metrics_file, status, step, wall_seconds);
  } catch (const std::runtime_error& error) {
    log_info("warning: cannot write {}: {}", settings_.metrics_file.string(), error.what());
  }
}

}  // namespace train
