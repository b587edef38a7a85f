#include "runtime/cuda_engine.h"

#include "common/config_error.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/device_clock.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/ops_cuda.h"
#include "runtime/comm/gradient_reducer_nccl.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/comm/nccl_check.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/model/gpu_resnet.h"
#include "runtime/model/model_state.h"
#include "runtime/timeline/engine_marks.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <deque>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>

namespace train {

namespace {

namespace cuda = kernels::cuda;

// The engine's buffers: as the model's, a GPU without room says so in the engine's words.
cuda::DeviceMemory make_device(size_t bytes) {
  cuda::DeviceMemory memory = cuda::try_allocate_device(bytes);
  if (!memory) {
    throw cuda::DeviceOutOfMemory(fmt::format("the engine's buffers ({} bytes more) do not fit on the GPU", bytes));
  }
  return memory;
}

// "The batch does not fit", with the model, the batch and the GPU's memory: the one message for running
// out of device memory, whether the engine was being made or was training (exit 65, as for any job that
// asks for more than its host has).
std::string does_not_fit(const TrainingSettings& settings, int rank, const std::string& what) {
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) cudaGetLastError();
  return fmt::format(
      "rank {}: resnet{} with {} images of {}x{} per rank in {} does not fit on this GPU ({:.1f} GiB, {:.1f} GiB free): "
      "{}; lower mini_batch_size (images per host, split over its ranks) or image_shape",
      rank, settings.depth, settings.batch_per_rank, settings.height, settings.width, precision_name(settings.precision),
      static_cast<double>(total_bytes) / (1 << 30), static_cast<double>(free_bytes) / (1 << 30), what);
}

template <typename T>
class CudaEngine final : public Engine {
 public:
  CudaEngine(const TrainingSettings& settings, int classes, MPI_Comm comm, std::chrono::milliseconds timeout)
      : CudaEngine(settings, plan_network(settings, classes), comm, timeout) {}
  ~CudaEngine() override;

  std::string describe() const override;
  const model::ResNetPlan& plan() const override { return model_.plan(); }
  size_t gradient_buckets() const override { return reducer_.plan().buckets.size(); }

  void initialize(uint64_t seed) override;
  void import_model(const std::vector<model_io::Tensor>& tensors) override;
  void import_momentum(const std::vector<model_io::Tensor>& tensors) override;
  model::ExportedTensors export_model() override;
  model::ExportedTensors export_momentum() override;
  std::vector<float> parameters() override;

  void train_step(const data::Batch& batch, double learning_rate) override;
  void request_totals() override;
  StepTotals take_totals() override;
  void infer(const data::Batch& batch, float* logits) override;
  void record_steps(int64_t steps) override;
  timeline::RecordedSteps take_recorded_steps() override;

 private:
  CudaEngine(const TrainingSettings& settings, model::ResNetPlan network, MPI_Comm comm,
             std::chrono::milliseconds timeout);
  static constexpr bool is_bf16 = !std::is_same_v<T, float>;
  int64_t pixels(const data::Batch& batch) const;
  const T* images_for_model(int slot, int64_t count);
  // Waits for `event` in short polls, at most the step timeout, watching NCCL for a failed peer.
  void wait_for(cudaEvent_t event, const char* what) { comm_.wait_for_event(event, timeout_, what); }
  void drain(const char* what);  // waits for everything queued on the compute stream
  void reduce_once();            // one reduction of the (zero) gradients: NCCL's connections and buffers
  void enqueue_step(const data::Batch& batch, double learning_rate);
  void infer_into(const data::Batch& batch, float* logits);
  // The timeline: a device timestamp of `slot` of the current step's row, in `stream`'s order.
  void mark(cudaStream_t stream, size_t slot) {
    cuda::record_device_time(stream, static_cast<unsigned long long*>(device_marks_.get()) + cursor_.index(slot));
  }
  void stop_marking();
  void enqueue_marks_copy();  // the recorded rows to host_marks_, after the steps queued so far

  const TrainingSettings& settings_;
  std::chrono::milliseconds timeout_;
  int device_ = 0;
  // The streams: batches are copied to the device on copy_, the model computes on compute_, the gradient
  // reductions run on communication_ (the device's highest priority); the reducer enqueues on them and
  // orders them with bucket_ready_ and reduced_.
  cuda::Stream compute_, copy_, communication_;
  cuda::Event bucket_ready_, reduced_;
  cuda::Context context_;
  comm::NcclCommunicator comm_;
  // The gradient buckets and their fp32 buffer (in reduced_gradients_, lent to the reducer), which the
  // model's optimizer reads and its backward writes into (fp32) or widens into (bf16).
  cuda::DeviceMemory reduced_gradients_;
  comm::NcclGradientReducer reducer_;
  model::GpuResNet<T> model_;
  // Two upload slots: step k's batch goes to slot k % 2 while step k - 1 computes from the other one.
  cuda::DeviceMemory images_[2], labels_[2];
  cuda::PinnedMemory host_labels_[2];
  cuda::DeviceMemory model_images_;  // bf16: the images as the model reads them
  cuda::DeviceMemory logits_, float_logits_;
  cuda::PinnedMemory host_logits_;
  cuda::Event uploaded_[2], consumed_[2], drained_;
  int64_t steps_ = 0, steps_since_totals_ = 0;
  // How long the compute stream waited for the reductions after backward, measured on the device: the
  // global timer at backward's end and after the last bucket's allreduce (clock_[0], clock_[1]), the sum
  // of the differences since the last totals (reduction_wait_, one double).
  cuda::DeviceMemory clock_, reduction_wait_;
  // Totals requested and not yet taken: each a pinned slot of {loss x images, images, hits, reduction
  // wait} that the compute stream fills, and an event after it. The trainer keeps at most two in flight.
  static constexpr int totals_slots = 4;
  cuda::PinnedMemory host_totals_;
  cuda::Event totals_copied_[totals_slots];
  struct RequestedTotals {
    int slot = 0;
    int64_t steps = 0;
  };
  std::deque<RequestedTotals> requested_;
  int next_totals_slot_ = 0;
  // The timeline's marks (runtime/timeline/step_marks.h): device timestamps written in stream order into
  // device_marks_, room for settings.timeline's steps taken when the engine is made (recording never
  // allocates); copied to host_marks_ by the compute stream after the last recorded step, read an interval
  // later; put on the host's clock by the probe's measurements at the start and the end of the recording.
  timeline::StepMarkCursor cursor_;
  bool marking_ = false, marks_copy_enqueued_ = false;
  int64_t mark_capacity_ = 0;  // steps
  size_t upload_bytes_ = 0;    // the last recorded step's batch
  cuda::DeviceMemory device_marks_;
  cuda::PinnedMemory host_marks_;
  cuda::Event marks_copied_, marks_zeroed_;
  std::unique_ptr<cuda::DeviceClockProbe> clock_probe_;
  std::optional<cuda::DeviceClockOffset> clock_at_start_;
};

// The fusion threshold goes to the reducer, which plans the buckets; the model writes into their buffer.
template <typename T>
CudaEngine<T>::CudaEngine(const TrainingSettings& settings, model::ResNetPlan network, MPI_Comm comm,
                          std::chrono::milliseconds timeout)
    : settings_(settings),
      timeout_(timeout),
      compute_(cuda::make_stream()),
      copy_(cuda::make_stream()),
      communication_(cuda::make_stream(cuda::StreamPriority::highest)),
      bucket_ready_(cuda::make_event()),
      reduced_(cuda::make_event()),
      context_(compute_.get()),
      comm_(comm, timeout),
      // fp32 buckets, averaged by NCCL in fp32: each bucket's bf16 gradients are widened into the fp32
      // buffer on the compute stream just before its reduction starts.
      reducer_(comm_, network.parameter_counts(), settings.bucket_bytes,
               comm::NcclGradientReducer::Device{compute_.get(), communication_.get(), bucket_ready_.get(),
                                                 reduced_.get(),
                                                 [this](size_t bytes) {
                                                   reduced_gradients_ = make_device(bytes);
                                                   return reduced_gradients_.get();
                                                 }},
               timeout, ncclAvg, [this](size_t begin, size_t end) { model_.widen_gradients(begin, end); }),
      model_(std::move(network), reducer_.gradients(), context_) {
  TRAIN_CUDA_CHECK(cudaGetDevice(&device_));
  const model::ResNetPlan& p = model_.plan();
  const size_t image_values = static_cast<size_t>(p.max_batch) * static_cast<size_t>(p.height * p.width * 3);
  const size_t logit_values = static_cast<size_t>(p.max_batch) * static_cast<size_t>(p.spec.num_classes);
  for (int slot = 0; slot < 2; ++slot) {
    images_[slot] = make_device(sizeof(float) * image_values);
    labels_[slot] = make_device(sizeof(std::int32_t) * static_cast<size_t>(p.max_batch));
    host_labels_[slot] = cuda::allocate_pinned(sizeof(std::int32_t) * static_cast<size_t>(p.max_batch));
    uploaded_[slot] = cuda::make_event();
    consumed_[slot] = cuda::make_event();
  }
  if constexpr (is_bf16) {
    model_images_ = make_device(sizeof(T) * image_values);
    float_logits_ = make_device(sizeof(float) * logit_values);
  }
  logits_ = make_device(sizeof(T) * logit_values);
  host_logits_ = cuda::allocate_pinned(sizeof(float) * logit_values);
  drained_ = cuda::make_event();
  clock_ = make_device(sizeof(unsigned long long) * 2);
  reduction_wait_ = make_device(sizeof(double));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(reduction_wait_.get(), 0, sizeof(double), compute_.get()));
  host_totals_ = cuda::allocate_pinned(sizeof(double) * 4 * totals_slots);
  for (auto& event : totals_copied_) event = cuda::make_event();
  if (settings.timeline) {
    timeline::StepMarkLayout layout;
    layout.buckets = reducer_.plan().buckets.size();
    mark_capacity_ = settings.timeline->steps();
    const size_t bytes = sizeof(unsigned long long) * static_cast<size_t>(mark_capacity_) * layout.per_step();
    device_marks_ = make_device(bytes);
    host_marks_ = cuda::allocate_pinned(bytes);
    marks_copied_ = cuda::make_event();
    marks_zeroed_ = cuda::make_event();
    clock_probe_ = std::make_unique<cuda::DeviceClockProbe>();
  }
  reduce_once();
}

template <typename T>
CudaEngine<T>::~CudaEngine() {
  // Nothing may still run when the memory it uses is freed. After a wait that failed or ran out (a peer
  // gone in the middle of an allreduce) the queue may never drain: abort NCCL at once, which ends the stuck
  // collectives, instead of waiting out the step timeout a second time. Otherwise drain, within the bound.
  if (comm_.broken()) {
    comm_.abort();
    return;
  }
  try {
    drain("the GPU's queued work, before freeing it");
  } catch (...) {
    comm_.abort();
  }
}

template <typename T>
std::string CudaEngine<T>::describe() const {
  cudaDeviceProp properties{};
  const std::string name = cudaGetDeviceProperties(&properties, device_) == cudaSuccess ? properties.name : "?";
  return fmt::format("cuda:{} ({}), {}, NCCL over {} rank{}", device_, name, precision_name(settings_.precision),
                     comm_.size(), comm_.size() == 1 ? "" : "s");
}

template <typename T>
void CudaEngine<T>::drain(const char* what) {
  TRAIN_CUDA_CHECK(cudaEventRecord(drained_.get(), compute_.get()));
  wait_for(drained_.get(), what);
}

// NCCL connects its peers and takes its buffers at the first collective: one reduction of every bucket
// when the engine is made (every rank makes it at the same point) finds a peer that cannot be reached,
// or a GPU without room, before training, under the same bound as every step.
template <typename T>
void CudaEngine<T>::reduce_once() {
  reducer_.begin_step();
  for (int p = model_.parameter_tensors() - 1; p >= 0; --p) reducer_.tensor_ready(p);
  reducer_.finish();
  drain("the first gradient allreduce (every rank's NCCL connections)");
}

template <typename T>
int64_t CudaEngine<T>::pixels(const data::Batch& batch) const {
  const model::ResNetPlan& p = model_.plan();
  if (batch.size < 1 || batch.size > p.max_batch || batch.height != p.height || batch.width != p.width) {
    throw std::invalid_argument(fmt::format("a batch of {} images of {}x{} for a model of up to {} images of {}x{}",
                                            batch.size, batch.height, batch.width, p.max_batch, p.height, p.width));
  }
  return int64_t{batch.size} * p.height * p.width * 3;
}

// The model reads T: fp32 images as uploaded, or cast to bf16 on the compute stream.
template <typename T>
const T* CudaEngine<T>::images_for_model(int slot, int64_t count) {
  const auto* uploaded = static_cast<const float*>(images_[slot].get());
  if constexpr (is_bf16) {
    T* images = static_cast<T*>(model_images_.get());
    cuda::cast<float, T>(context_, count, uploaded, images);
    return images;
  } else {
    return uploaded;
  }
}

// One step, enqueued: upload (copy stream) -> cast, forward, loss, backward with bucketed allreduces
// (compute and communication streams) -> the optimizer after the reductions. Returns once the batch is on
// the device; the step itself may still be running.
template <typename T>
void CudaEngine<T>::train_step(const data::Batch& batch, double learning_rate) {
  try {
    enqueue_step(batch, learning_rate);
  } catch (const cuda::DeviceOutOfMemory& error) {
    throw ConfigError(does_not_fit(settings_, comm_.rank(), error.what()));
  }
}

template <typename T>
void CudaEngine<T>::enqueue_step(const data::Batch& batch, double learning_rate) {
  const int64_t count = pixels(batch);
  const int slot = static_cast<int>(steps_ % 2);
  const bool marked = marking_ && cursor_.begin_step();
  const timeline::StepMarkLayout& layout = cursor_.layout();
  // The slot is free once the step two back has run (it read these buffers until its backward ended).
  std::memcpy(host_labels_[slot].get(), batch.labels.data(), sizeof(std::int32_t) * static_cast<size_t>(batch.size));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), consumed_[slot].get(), 0));
  if (marked) mark(copy_.get(), layout.at(timeline::Mark::upload_begin));
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(images_[slot].get(), batch.images.data(), sizeof(float) * static_cast<size_t>(count),
                                   cudaMemcpyHostToDevice, copy_.get()));
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(labels_[slot].get(), host_labels_[slot].get(),
                                   sizeof(std::int32_t) * static_cast<size_t>(batch.size), cudaMemcpyHostToDevice,
                                   copy_.get()));
  if (marked) {
    mark(copy_.get(), layout.at(timeline::Mark::upload_end));
    upload_bytes_ = sizeof(float) * static_cast<size_t>(count) + sizeof(std::int32_t) * static_cast<size_t>(batch.size);
  }
  TRAIN_CUDA_CHECK(cudaEventRecord(uploaded_[slot].get(), copy_.get()));
  // Before its wait for the upload: the stream reaches the step once it is done with what came before.
  if (marked) mark(compute_.get(), layout.at(timeline::Mark::compute_begin));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), uploaded_[slot].get(), 0));
  if (marked) mark(compute_.get(), layout.at(timeline::Mark::forward_begin));

  reducer_.begin_step();
  model_.forward_and_loss(images_for_model(slot, count), static_cast<const std::int32_t*>(labels_[slot].get()),
                          batch.size, static_cast<float>(settings_.label_smoothing),
                          /*gradient_scale=*/1.0f);  // ncclAvg averages
  model_.backward([&](int p) { reducer_.tensor_ready(p); }, {});
  // Every bucket's allreduce is enqueued by now: time backward's end and the last reduction's, then let
  // the compute stream wait for the reductions and add what it waited.
  auto* clock = static_cast<unsigned long long*>(clock_.get());
  cuda::record_device_time(compute_.get(), clock);
  cuda::record_device_time(communication_.get(), clock + 1);
  reducer_.finish();
  if (marked) mark(compute_.get(), layout.at(timeline::Mark::reductions_done));
  cuda::add_elapsed_seconds(compute_.get(), clock, clock + 1, static_cast<double*>(reduction_wait_.get()));
  model_.sgd_step(optimizer_options(settings_, learning_rate));
  if (marked) {
    mark(compute_.get(), layout.at(timeline::Mark::optimizer_end));
    if (!cursor_.more()) {
      stop_marking();
      enqueue_marks_copy();
    }
  }
  TRAIN_CUDA_CHECK(cudaEventRecord(consumed_[slot].get(), compute_.get()));
  ++steps_;
  ++steps_since_totals_;
  wait_for(uploaded_[slot].get(), "the copy of a batch to the GPU");  // the trainer may refill the batch now
}

// The sums since the last request, copied back by the compute stream after the steps queued so far while
// the GPU goes on: a log line never stops the GPU (runtime/trainer.cpp prints it one interval later).
template <typename T>
void CudaEngine<T>::request_totals() {
  if (requested_.size() == totals_slots) throw std::logic_error("CudaEngine: totals requested and never taken");
  const int slot = next_totals_slot_;
  next_totals_slot_ = (next_totals_slot_ + 1) % totals_slots;
  double* host = static_cast<double*>(host_totals_.get()) + 4 * slot;
  model_.copy_totals_async(host);
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(host + 3, reduction_wait_.get(), sizeof(double), cudaMemcpyDeviceToHost,
                                   compute_.get()));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(reduction_wait_.get(), 0, sizeof(double), compute_.get()));
  TRAIN_CUDA_CHECK(cudaEventRecord(totals_copied_[slot].get(), compute_.get()));
  requested_.push_back(RequestedTotals{slot, steps_since_totals_});
  steps_since_totals_ = 0;
}

template <typename T>
StepTotals CudaEngine<T>::take_totals() {
  if (requested_.empty()) request_totals();
  const RequestedTotals oldest = requested_.front();
  wait_for(totals_copied_[oldest.slot].get(), "the steps' loss and hits");
  requested_.pop_front();
  const double* host = static_cast<const double*>(host_totals_.get()) + 4 * oldest.slot;
  StepTotals result{host[0], host[1], host[2], oldest.steps};
  result.reduction_wait_seconds = host[3];
  return result;
}

// Device timestamps at each mark (runtime/timeline/step_marks.h), on the stream doing the work: the model's
// passes mark their layer groups on the compute stream, the reducer each bucket's start and end on the
// communication stream, enqueue_step the upload on the copy stream and the rest on the compute stream.
template <typename T>
void CudaEngine<T>::record_steps(int64_t steps) {
  if (steps > mark_capacity_) {
    throw std::logic_error(fmt::format("CudaEngine: {} steps to record, room for {}", steps, mark_capacity_));
  }
  timeline::StepMarkLayout layout;
  layout.buckets = reducer_.plan().buckets.size();
  cursor_.start(layout, steps);
  marks_copy_enqueued_ = false;
  marking_ = steps > 0;
  if (!marking_) return;
  // Zeroed in the copy stream's order, which every mark of the coming steps follows: the copy stream's own,
  // the compute stream's (it waits for the zeroing below, then for each upload), the communication
  // stream's (it waits for the compute stream).
  TRAIN_CUDA_CHECK(cudaMemsetAsync(device_marks_.get(), 0,
                                   sizeof(unsigned long long) * static_cast<size_t>(steps) * layout.per_step(),
                                   copy_.get()));
  // The compute stream's first mark (compute_begin) comes before its wait for the upload: it waits here.
  TRAIN_CUDA_CHECK(cudaEventRecord(marks_zeroed_.get(), copy_.get()));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), marks_zeroed_.get(), 0));
  clock_at_start_ = clock_probe_->measure(16, std::chrono::milliseconds(1000));
  timeline::start_engine_marks(
      model_, reducer_, cursor_, [this](size_t slot) { mark(compute_.get(), slot); },
      [this](size_t slot) { mark(communication_.get(), slot); });
}

template <typename T>
void CudaEngine<T>::stop_marking() {
  marking_ = false;
  timeline::stop_engine_marks(model_, reducer_);
}

// After every recorded step's work on the compute stream, which has by then waited for the copy stream's
// and the communication stream's marks of those steps (the uploads' and the reductions' events).
template <typename T>
void CudaEngine<T>::enqueue_marks_copy() {
  const size_t bytes = sizeof(unsigned long long) * cursor_.rows_begun() * cursor_.layout().per_step();
  if (bytes > 0) {
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(host_marks_.get(), device_marks_.get(), bytes, cudaMemcpyDeviceToHost,
                                     compute_.get()));
  }
  TRAIN_CUDA_CHECK(cudaEventRecord(marks_copied_.get(), compute_.get()));
  marks_copy_enqueued_ = true;
}

// The device's times on the host's clock: device - host measured at the start and at the end of the
// recording, interpolated between them by device time (the two clocks may drift apart).
template <typename T>
timeline::RecordedSteps CudaEngine<T>::take_recorded_steps() {
  timeline::RecordedSteps recorded;
  recorded.device = true;
  recorded.layout = cursor_.layout();
  recorded.bucket_bytes = timeline::bucket_bytes(reducer_.plan());
  recorded.upload_bytes = upload_bytes_;
  const size_t rows = cursor_.rows_begun();
  if (marking_) stop_marking();
  if (rows == 0 || mark_capacity_ == 0) return recorded;
  if (!marks_copy_enqueued_) enqueue_marks_copy();  // training ended inside the range
  wait_for(marks_copied_.get(), "the timeline's marks of the recorded steps");
  const std::optional<cuda::DeviceClockOffset> at_end = clock_probe_->measure(16, std::chrono::milliseconds(1000));
  cursor_.start(recorded.layout, 0);
  if (!clock_at_start_ && !at_end) {
    recorded.clock = "none: the GPU's clock could not be measured against the host's, so its marks are left out";
    return recorded;
  }
  const cuda::DeviceClockOffset first = clock_at_start_ ? *clock_at_start_ : *at_end;
  const cuda::DeviceClockOffset last = at_end ? *at_end : *clock_at_start_;
  const auto* device_marks = static_cast<const unsigned long long*>(host_marks_.get());
  std::vector<int64_t> device(rows * recorded.layout.per_step());
  for (size_t i = 0; i < device.size(); ++i) device[i] = static_cast<int64_t>(device_marks[i]);
  recorded.marks =
      timeline::device_times_on_host(device, timeline::ClockReading{first.device_ns, first.device_minus_host_ns},
                                     timeline::ClockReading{last.device_ns, last.device_minus_host_ns});
  recorded.clock = fmt::format("device timestamps (%globaltimer) on the host's clock, offset measured {} and {} "
                               "(uncertainty {} ns and {} ns)",
                               clock_at_start_ ? "at the start" : "-", at_end ? "at the end" : "-",
                               clock_at_start_ ? clock_at_start_->uncertainty_ns : -1,
                               at_end ? at_end->uncertainty_ns : -1);
  clock_at_start_.reset();
  return recorded;
}

template <typename T>
void CudaEngine<T>::infer(const data::Batch& batch, float* logits) {
  try {
    infer_into(batch, logits);
  } catch (const cuda::DeviceOutOfMemory& error) {
    throw ConfigError(does_not_fit(settings_, comm_.rank(), error.what()));
  }
}

template <typename T>
void CudaEngine<T>::infer_into(const data::Batch& batch, float* logits) {
  const int64_t count = pixels(batch);
  const int64_t values = int64_t{batch.size} * model_.spec().num_classes;
  // On the compute stream: after every step queued before it, which no longer needs slot 0's images.
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(images_[0].get(), batch.images.data(), sizeof(float) * static_cast<size_t>(count),
                                   cudaMemcpyHostToDevice, compute_.get()));
  T* device_logits = static_cast<T*>(logits_.get());
  model_.infer(images_for_model(0, count), batch.size, device_logits);
  const float* float_logits = nullptr;
  if constexpr (is_bf16) {
    float* converted = static_cast<float*>(float_logits_.get());
    cuda::cast<T, float>(context_, values, device_logits, converted);
    float_logits = converted;
  } else {
    float_logits = device_logits;
  }
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(host_logits_.get(), float_logits, sizeof(float) * static_cast<size_t>(values),
                                   cudaMemcpyDeviceToHost, compute_.get()));
  drain("inference on the GPU");
  std::memcpy(logits, host_logits_.get(), sizeof(float) * static_cast<size_t>(values));
}

template <typename T>
void CudaEngine<T>::initialize(uint64_t seed) {
  drain("the GPU before initialising the model");
  const model::ResNetPlan& p = model_.plan();
  model::HostModelState state{std::vector<float>(p.parameter_elements), std::vector<float>(p.float_buffer_elements),
                              std::vector<int64_t>(p.tracked_buffers)};
  model::initialize_resnet(p, seed, state.parameters.data(), state.float_buffers.data(), state.tracked.data());
  model_.upload_state(state);
  model_.upload_momentum(std::vector<float>(p.parameter_elements, 0.0f));
}

template <typename T>
void CudaEngine<T>::import_model(const std::vector<model_io::Tensor>& tensors) {
  drain("the GPU before loading weights");
  model::HostModelState state = model_.download_state();
  model::import_model_state(model_.plan(), tensors, state.parameters.data(), state.float_buffers.data(),
                            state.tracked.data());
  model_.upload_state(state);
}

template <typename T>
void CudaEngine<T>::import_momentum(const std::vector<model_io::Tensor>& tensors) {
  drain("the GPU before loading momentum");
  std::vector<float> momentum = model_.download_momentum();
  train::model::import_momentum(model_.plan(), tensors, momentum.data());
  model_.upload_momentum(momentum);
}

template <typename T>
model::ExportedTensors CudaEngine<T>::export_model() {
  drain("the GPU before reading the model");
  return model_.export_state();
}

template <typename T>
model::ExportedTensors CudaEngine<T>::export_momentum() {
  drain("the GPU before reading momentum");
  const std::vector<float> momentum = model_.download_momentum();
  return train::model::export_momentum(model_.plan(), momentum.data());
}

template <typename T>
std::vector<float> CudaEngine<T>::parameters() {
  drain("the GPU before reading the parameters");
  return model_.download_parameters();
}

}  // namespace

std::unique_ptr<Engine> make_cuda_engine(const TrainingSettings& settings, int classes, const RankIdentity& identity,
                                         MPI_Comm comm, std::chrono::milliseconds timeout) {
  comm::set_error_rank(identity.rank);
  try {
    if (settings.precision == Precision::bfloat16) {
      return std::make_unique<CudaEngine<__nv_bfloat16>>(settings, classes, comm, timeout);
    }
    return std::make_unique<CudaEngine<float>>(settings, classes, comm, timeout);
  } catch (const cuda::DeviceOutOfMemory& error) {
    throw ConfigError(does_not_fit(settings, identity.rank, error.what()));
  }
}

}  // namespace train
