// The CPU engine: CpuResNet<float> (which holds the parameters, gradients and momentum and runs the CPU
// optimizer) + the bucketed MPI gradient reducer. Everything runs on the calling thread (and the kernels'
// OpenMP threads), so every call has finished when it returns.
#pragma once

#include "common/monotonic_clock.h"
#include "job/rank_environment.h"
#include "runtime/comm/gradient_reducer_mpi.h"
#include "runtime/engine/engine.h"
#include "runtime/engine/step_observer.h"
#include "runtime/model/cpu_resnet.h"
#include "runtime/training_settings.h"

#include <mpi.h>

#include <array>
#include <chrono>
#include <vector>

namespace train {

// The CPU engine's StepProbe: marks from the host's clock into host memory, sums added on the host.
class CpuStepProbe final : public StepProbe<model::CpuResNet<float>::StepResult> {
 public:
  void start_marks(size_t values) override { marks_.assign(values, 0); }
  void mark(StepLane, size_t index) override { marks_[index] = monotonic_ns(); }
  void marks_done(size_t) override {}
  void take_marks(size_t values, timeline::RecordedSteps& recorded) override;

  void add_step(const model::CpuResNet<float>::StepResult& result, int images) override;
  void reduction_wait_begins() override { wait_began_ = std::chrono::steady_clock::now(); }
  void reduction_wait_ends() override;
  void copy_sums(int slot) override;
  const double* sums(int slot) override { return slots_[static_cast<size_t>(slot)].data(); }

 private:
  std::vector<int64_t> marks_;
  std::array<double, sum_count> running_{};  // since the last copy
  std::array<std::array<double, sum_count>, sum_slots> slots_{};
  std::chrono::steady_clock::time_point wait_began_;
};

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

  void run_step(const data::Batch& batch, double learning_rate) override;
  StepReports& step_reports() override { return observer_; }
  void infer(const data::Batch& batch, float* logits) override;

 private:
  CpuEngine(const TrainingSettings& settings, model::ResNetPlan network, int ranks, MPI_Comm comm,
            std::chrono::milliseconds timeout);

  const TrainingSettings& settings_;
  float gradient_scale_;  // 1/ranks: the reducer's sum is then the average
  comm::MpiGradientReducer reducer_;  // the gradient buckets and their buffer, which the model writes into
  model::CpuResNet<float> model_;
  CpuStepProbe probe_;
  StepObserver<model::CpuResNet<float>::StepResult> observer_;
};

}  // namespace train
