#include "runtime/cpu_engine.h"

#include "runtime/timeline/engine_marks.h"

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
      model_(std::move(network), reducer_.gradients()) {}

std::string CpuEngine::describe() const {
  return fmt::format("cpu ({} thread{}), float32", settings_.threads, settings_.threads == 1 ? "" : "s");
}

void CpuEngine::initialize(uint64_t seed) { model_.initialize(seed); }

void CpuEngine::import_momentum(const std::vector<model_io::Tensor>& tensors) {
  train::model::import_momentum(model_.plan(), tensors, model_.all_momentum().data());
}

model::ExportedTensors CpuEngine::export_momentum() {
  return train::model::export_momentum(model_.plan(), model_.all_momentum().data());
}

// One step: forward and backward with each bucket's allreduce started as backward completes it, the wait
// for the last bucket, then the optimizer over every parameter at once.
void CpuEngine::train_step(const data::Batch& batch, double learning_rate) {
  const bool marked = marking_ && cursor_.begin_step();
  if (marked) mark(cursor_.layout().at(timeline::Mark::forward_begin));
  reducer_.begin_step();
  const auto result = model_.forward_and_loss(batch.images.data(), batch.labels.data(), batch.size,
                                              static_cast<float>(settings_.label_smoothing), gradient_scale_);
  model_.backward([&](int p) { reducer_.tensor_ready(p); }, [&] { reducer_.progress(); });
  const auto reduction_started = std::chrono::steady_clock::now();
  reducer_.finish();
  totals_.reduction_wait_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - reduction_started).count();
  if (marked) mark(cursor_.layout().at(timeline::Mark::reductions_done));
  model_.sgd_step(optimizer_options(settings_, learning_rate));
  if (marked) {
    mark(cursor_.layout().at(timeline::Mark::optimizer_end));
    if (!cursor_.more()) stop_marking();
  }

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

// The host's clock at each mark: the model's passes mark their layer groups and ends, the reducer each
// bucket's start and completion, train_step the rest.
void CpuEngine::record_steps(int64_t steps) {
  timeline::StepMarkLayout layout;
  layout.buckets = reducer_.plan().buckets.size();
  cursor_.start(layout, steps);
  marks_.assign(static_cast<size_t>(std::max<int64_t>(0, steps)) * layout.per_step(), 0);
  marking_ = steps > 0;
  if (!marking_) return;
  const auto mark_here = [this](size_t slot) { mark(slot); };
  timeline::start_engine_marks(model_, reducer_, cursor_, mark_here, mark_here);
}

void CpuEngine::stop_marking() {
  marking_ = false;
  timeline::stop_engine_marks(model_, reducer_);
}

timeline::RecordedSteps CpuEngine::take_recorded_steps() {
  stop_marking();
  timeline::RecordedSteps recorded;
  recorded.layout = cursor_.layout();
  marks_.resize(cursor_.rows_begun() * recorded.layout.per_step());
  recorded.marks = std::move(marks_);
  marks_.clear();
  recorded.bucket_bytes = timeline::bucket_bytes(reducer_.plan());
  recorded.clock = "the host's monotonic clock";
  cursor_.start(recorded.layout, 0);
  return recorded;
}

void CpuEngine::infer(const data::Batch& batch, float* logits) { model_.infer(batch.images.data(), batch.size, logits); }

}  // namespace train
