// The CPU engine: CpuResNet<float> (which holds the parameters, gradients and momentum and runs the CPU
// optimizer) + the bucketed MPI gradient reducer. Everything runs on the calling thread (and the kernels'
// OpenMP threads), so every call has finished when it returns.
#pragma once

#include "common/monotonic_clock.h"
#include "job/rank_environment.h"
#include "runtime/comm/gradient_reducer_mpi.h"
#include "runtime/engine.h"
#include "runtime/model/cpu_resnet.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <chrono>
#include <deque>
#include <vector>

namespace train {

class CpuEngine final : public Engine {
 public:
  // A ResNet of settings.depth for `classes` classes and batches of settings.batch_per_rank images.
  // `timeout` bounds each step's gradient reduction (a rank that never joins becomes an error).
  CpuEngine(const TrainingSettings& settings, int classes, const RankIdentity& identity, MPI_Comm comm,
            std::chrono::milliseconds timeout);

  std::string describe() const override;
  const model::ResNetPlan& plan() const override { return model_.plan(); }
  size_t gradient_buckets() const override { return reducer_.plan().buckets.size(); }

  void initialize(uint64_t seed) override;
  void import_model(const std::vector<model_io::Tensor>& tensors) override { model_.import_state(tensors); }
  void import_momentum(const std::vector<model_io::Tensor>& tensors) override;
  model::ExportedTensors export_model() override { return model_.export_state(); }
  model::ExportedTensors export_momentum() override;
  std::vector<float> parameters() override { return model_.all_values(); }

  void train_step(const data::Batch& batch, double learning_rate) override;
  void request_totals() override;
  StepTotals take_totals() override;
  void infer(const data::Batch& batch, float* logits) override;
  void record_steps(int64_t steps) override;
  timeline::RecordedSteps take_recorded_steps() override;

 private:
  CpuEngine(const TrainingSettings& settings, model::ResNetPlan network, int ranks, MPI_Comm comm,
            std::chrono::milliseconds timeout);
  void mark(size_t slot) { marks_[cursor_.index(slot)] = monotonic_ns(); }
  void stop_marking();

  const TrainingSettings& settings_;
  float gradient_scale_;  // 1/ranks: the reducer's sum is then the average
  comm::MpiGradientReducer reducer_;  // the gradient buckets and their buffer, which the model writes into
  model::CpuResNet<float> model_;
  StepTotals totals_;                  // since the last request
  std::deque<StepTotals> requested_;  // requested, not yet taken
  // The timeline's marks: while cursor_ has steps to record, the model's passes and the reducer's buckets
  // mark too (their hooks are set only then).
  timeline::StepMarkCursor cursor_;
  bool marking_ = false;
  std::vector<int64_t> marks_;
};

}  // namespace train
