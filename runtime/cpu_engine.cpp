#include "runtime/cpu_engine.h"

#include "kernels/ops.h"

#include <fmt/format.h>

#include <chrono>

namespace train {

CpuEngine::CpuEngine(const TrainingSettings& settings, int classes, const RankIdentity& identity, MPI_Comm comm,
                     std::chrono::milliseconds timeout)
    : settings_(settings),
      gradient_scale_(1.0f / static_cast<float>(identity.size)),
      model_(make_model<CpuResNet<float>>(settings, classes)),
      reducer_(comm, model_.bucket_plan(), model_.all_gradients().data(), timeout),
      momentum_(model_.all_values().size(), 0.0f) {
  for (int p = 0; p < model_.parameter_tensors(); ++p) {
    const auto& parameter = model_.parameters()[static_cast<size_t>(p)];
    ops::SgdTensor<float> tensor;
    tensor.param = model_.parameter_data(p);
    tensor.grad = model_.gradient_data(p);
    tensor.momentum_buffer = momentum_.data() + parameter.offset;
    tensor.count = parameter.count;
    tensor.weight_decay = model_.spec().tensors[static_cast<size_t>(parameter.spec_index)].decays();
    sgd_tensors_.push_back(tensor);
  }
}

std::string CpuEngine::describe() const {
  return fmt::format("cpu ({} thread{}), float32", settings_.threads, settings_.threads == 1 ? "" : "s");
}

void CpuEngine::initialize(uint64_t seed) {
  model_.initialize(seed);
  std::fill(momentum_.begin(), momentum_.end(), 0.0f);
}

void CpuEngine::import_momentum(const std::vector<model_io::Tensor>& tensors) {
  train::import_momentum(model_.plan(), tensors, momentum_.data());
}

ExportedTensors CpuEngine::export_momentum() { return train::export_momentum(model_.plan(), momentum_.data()); }

// One step: forward and backward with each bucket's allreduce started as backward completes it, the wait
// for the last bucket, then the optimizer over every parameter at once.
void CpuEngine::train_step(const data::Batch& batch, double learning_rate) {
  reducer_.begin_step();
  const auto result = model_.train_step(
      batch.images.data(), batch.labels.data(), batch.size, static_cast<float>(settings_.label_smoothing),
      gradient_scale_, [&](int p) { reducer_.tensor_ready(p); }, [&] { reducer_.progress(); });
  const auto reduction_started = std::chrono::steady_clock::now();
  reducer_.finish();
  totals_.reduction_wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - reduction_started).count();
  ops::sgd_step<float>(sgd_tensors_, optimizer_options(settings_, learning_rate));

  totals_.loss += result.loss * batch.size;
  totals_.images += batch.size;
  totals_.correct += result.correct;
  ++totals_.steps;
}

void CpuEngine::request_totals() {
  requested_.push_back(totals_);
  totals_ = StepTotals{};
}

StepTotals CpuEngine::take_totals() {
  if (requested_.empty()) request_totals();
  const StepTotals oldest = requested_.front();
  requested_.pop_front();
  return oldest;
}

void CpuEngine::infer(const data::Batch& batch, float* logits) { model_.infer(batch.images.data(), batch.size, logits); }

}  // namespace train
