#include "runtime/engine/cpu_engine.h"

#include "kernels/ops.h"

#include <fmt/format.h>

#include <chrono>

namespace train {

CpuEngine::CpuEngine(const TrainingSettings& settings, int classes, const RankIdentity& identity, MPI_Comm comm,
                     std::chrono::milliseconds timeout)
    : CpuEngine(settings, plan_network(settings, classes), identity.size, comm, timeout) {}

// The fusion threshold goes to the reducer, which plans the buckets; the model writes into their buffer.
CpuEngine::CpuEngine(const TrainingSettings& settings, model::ResNetPlan network, int ranks, MPI_Comm comm,
                     std::chrono::milliseconds timeout)
    : settings_(settings),
      gradient_scale_(1.0f / static_cast<float>(ranks)),
      reducer_(comm, network.parameter_counts(), settings.bucket_bytes, timeout),
      model_(std::move(network), reducer_.gradients()),
      observer_(probe_, model_, reducer_) {}

std::string CpuEngine::describe() const {
  // OpenMP's own count, not the one the settings asked for: what the ops will really use.
  const int threads = kernels::cpu_threads();
  return fmt::format("cpu ({} thread{}), float32", threads, threads == 1 ? "" : "s");
}

void CpuEngine::initialize(uint64_t seed) { model_.initialize(seed); }

void CpuEngine::import_momentum(const std::vector<model_io::Tensor>& tensors) {
  train::model::import_momentum(model_.plan(), tensors, model_.all_momentum().data());
}

model::ExportedTensors CpuEngine::export_momentum() {
  return train::model::export_momentum(model_.plan(), model_.all_momentum().data());
}

// One training step, each phase one call: the observer (runtime/engine/step_observer.h) keeps the log lines'
// sums and the timeline's marks.
void CpuEngine::run_step(const data::Batch& batch, double learning_rate) {
  observer_.step_begins();
  observer_.mark(timeline::Mark::forward_begin);
  reducer_.begin_step();
  // Forward and loss: the loss's gradient scaled by 1/ranks, so that the reducer's sum is the average.
  const auto result = model_.forward_and_loss(batch.images.data(), batch.labels.data(), batch.size,
                                              static_cast<float>(settings_.label_smoothing), gradient_scale_);
  // Backward: each bucket's allreduce starts as soon as backward has written its last gradient.
  model_.backward([&](int p) { reducer_.tensor_ready(p); }, [&] { reducer_.progress(); });
  observer_.waiting_for_reductions();
  reducer_.finish();
  observer_.reductions_done();
  model_.sgd_step(optimizer_options(settings_, learning_rate));
  observer_.step_done(result, batch.size);
}

void CpuStepProbe::add_step(const model::CpuResNet<float>::StepResult& result, int images) {
  running_[0] += result.loss * images;
  running_[1] += images;
  running_[2] += result.correct;
}

void CpuStepProbe::reduction_wait_ends() {
  running_[3] += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_began_).count();
}

void CpuStepProbe::copy_sums(int slot) {
  slots_[static_cast<size_t>(slot)] = running_;
  running_ = {};
}

void CpuStepProbe::take_marks(size_t values, timeline::RecordedSteps& recorded) {
  marks_.resize(values);
  recorded.marks = std::move(marks_);
  marks_.clear();
  recorded.clock = "the host's monotonic clock";
}

void CpuEngine::infer(const data::Batch& batch, float* logits) { model_.infer(batch.images.data(), batch.size, logits); }

}  // namespace train
