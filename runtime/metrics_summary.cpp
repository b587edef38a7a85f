#include "runtime/metrics_summary.h"

#include "common/atomic_file.h"

namespace train {

void JobStepSums::add(const JobStepSums& other) {
  loss += other.loss;
  images += other.images;
  correct += other.correct;
  seconds += other.seconds;
  steps += other.steps;
}

void MetricsSummary::add_epoch(int64_t epoch, int64_t last_step, const JobStepSums& sums,
                               const std::optional<Validation>& validation, bool complete) {
  nlohmann::json entry = {{"epoch", epoch},
                          {"complete", complete},
                          {"last_step", last_step},
                          {"steps", sums.steps},
                          {"images", static_cast<int64_t>(sums.images)},
                          {"loss", sums.mean_loss()},
                          {"train_top1", sums.top1()},
                          {"images_per_sec", sums.images_per_second()},
                          {"training_seconds", sums.seconds}};
  if (validation) {
    entry["validation_top1"] = validation->top1;
    entry["validation_top5"] = validation->top5;
    entry["validation_images"] = validation->images;
    last_validation_ = validation;
  }
  epochs_.push_back(std::move(entry));
  total_.add(sums);
  last_epoch_ = sums;
}

int64_t MetricsSummary::completed_epochs() const {
  int64_t completed = 0;
  for (const auto& entry : epochs_) completed += entry.at("complete").get<bool>() ? 1 : 0;
  return completed;
}

nlohmann::json MetricsSummary::to_json(const std::string& status, int64_t step, double wall_seconds) const {
  nlohmann::json final_figures = {{"status", status},
                                  {"step", step},
                                  {"epochs_completed", completed_epochs()},
                                  {"wall_time_seconds", wall_seconds},
                                  {"training_seconds", total_.seconds},
                                  {"images", static_cast<int64_t>(total_.images)},
                                  {"images_per_sec", total_.images_per_second()}};
  if (!epochs_.empty()) {
    final_figures["loss"] = last_epoch_.mean_loss();
    final_figures["train_top1"] = last_epoch_.top1();
  }
  if (last_validation_) {
    final_figures["validation_top1"] = last_validation_->top1;
    final_figures["validation_top5"] = last_validation_->top5;
  }
  return {{"job", job_}, {"final", final_figures}, {"epochs", epochs_}};
}

void MetricsSummary::write(const std::filesystem::path& root, const std::filesystem::path& path,
                           const std::string& status, int64_t step, double wall_seconds) const {
  make_folders_below(root, path.parent_path());
  write_file_atomically(path.string(), to_json(status, step, wall_seconds).dump(2) + "\n");
}

}  // namespace train
