// What rank 0 writes about training besides the log: metrics.json (runtime/metrics_summary.h) after every
// epoch and at the end, and TensorBoard scalars at every log line and epoch end. A file that cannot be
// written is said once in the log and given up: training goes on.
#pragma once

#include "runtime/metrics_summary.h"
#include "runtime/rank_timing.h"
#include "runtime/tensorboard_writer.h"
#include "runtime/training_settings.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace train {

// One log line's interval: the job's sums over its steps and every rank's times.
struct IntervalFigures {
  int64_t step = 0, epoch = 0;
  double learning_rate = 0;
  JobStepSums sums;
  std::vector<RankTimes> times;
};

class ReportFiles {
 public:
  // `job`: the job in a few figures, kept at the top of metrics.json.
  ReportFiles(const TrainingSettings& settings, nlohmann::json job);

  void interval(const IntervalFigures& figures);
  void epoch(int64_t epoch, int64_t step, const JobStepSums& sums, const std::optional<Validation>& validation,
             bool complete);
  // metrics.json with `status` ("training", "finished", "stopped") after `step` steps and `wall_seconds`.
  void write_summary(const std::string& status, int64_t step, double wall_seconds);

 private:
  void flush_tensorboard();

  const TrainingSettings& settings_;
  MetricsSummary summary_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;  // null when its folder cannot be written
};

}  // namespace train
