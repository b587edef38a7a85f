// metrics.json: the job's figures in one file for people and scripts, in /opt/ml/output/data (SageMaker
// uploads that folder as output.tar.gz): each epoch's training loss, top-1, images/s and time, its
// validation top-1/top-5, and the final figures with the wall time. Rank 0 keeps it and rewrites it
// (whole, under a temporary name then renamed) after every epoch and at the end.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace train {

// Sums over some steps of the whole job: every rank's RankStepSums (runtime/engine/step_observer.h) added up,
// with the steps' wall time.
struct JobStepSums {
  double loss = 0;  // sum of (mean loss of a batch) x (its images)
  double images = 0;
  double correct = 0;
  double seconds = 0;  // wall time of the steps (validation and checkpoints left out)
  int64_t steps = 0;

  void add(const JobStepSums& other);
  double mean_loss() const { return images > 0 ? loss / images : 0; }
  double top1() const { return images > 0 ? correct / images : 0; }
  double images_per_second() const { return seconds > 0 ? images / seconds : 0; }
};

struct Validation {
  double top1 = 0, top5 = 0;
  int64_t images = 0;
};

class MetricsSummary {
 public:
  // `job` is a JSON object describing the job (model, ranks, batch), kept as it is.
  explicit MetricsSummary(nlohmann::json job) : job_(std::move(job)) {}

  void add_epoch(int64_t epoch, int64_t last_step, const JobStepSums& sums, const std::optional<Validation>& validation,
                 bool complete);
  // The whole document; `status` says how training ended so far ("training", "finished", "stopped").
  nlohmann::json to_json(const std::string& status, int64_t step, double wall_seconds) const;
  // to_json written to `path` atomically, its folder made below `root` (the job's output/) without following a
  // symbolic link (common/atomic_file.h's make_folders_below). Throws std::runtime_error on a write error and
  // for such a link.
  void write(const std::filesystem::path& root, const std::filesystem::path& path, const std::string& status,
             int64_t step, double wall_seconds) const;

 private:
  int64_t completed_epochs() const;
  nlohmann::json job_;
  nlohmann::json epochs_ = nlohmann::json::array();
  JobStepSums total_;
  std::optional<Validation> last_validation_;
  JobStepSums last_epoch_;
};

}  // namespace train
