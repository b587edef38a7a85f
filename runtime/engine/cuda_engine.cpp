#include "runtime/engine/cuda_engine.h"

#include "common/config_error.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/ops_cuda.h"
#include "runtime/comm/gradient_reducer_nccl.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/comm/nccl_check.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/model/gpu_resnet.h"
#include "runtime/engine/cuda_step_probe.h"
#include "runtime/engine/step_observer.h"
#include "runtime/model/model_state.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
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

// The timeline's marks the engine makes room for when it is made (recording never allocates): every
// recorded step's row, for settings.timeline's steps; none without a timeline.
size_t timeline_marks(const TrainingSettings& settings, const comm::BucketPlan& buckets) {
  if (!settings.timeline) return 0;
  timeline::StepMarkLayout layout;
  layout.buckets = buckets.buckets.size();
  return static_cast<size_t>(settings.timeline->steps()) * layout.per_step();
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

  void run_step(const data::Batch& batch, double learning_rate) override;
  StepReports& step_reports() override { return observer_; }
  void infer(const data::Batch& batch, float* logits) override;

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
  int take_batch(const data::Batch& batch);  // its upload to a slot, on the copy stream: the slot
  void infer_into(const data::Batch& batch, float* logits);

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
  int64_t steps_ = 0;
  // The step observer (runtime/engine/step_observer.h) and its device half: the log lines' sums on the
  // device, the timeline's marks as device timestamps.
  CudaStepProbe probe_;
  StepObserver<model::DeviceStepResult> observer_;
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
      model_(std::move(network), reducer_.gradients(), context_),
      probe_(CudaStepProbe::Streams{compute_.get(), communication_.get(), copy_.get()},
             timeline_marks(settings, reducer_.plan()), make_device,
             [this](cudaEvent_t event, const char* what) { wait_for(event, what); }),
      observer_(probe_, model_, reducer_) {
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

// One training step, enqueued, each phase one call: take the batch (its upload on the copy stream), forward
// and loss, backward with each bucket's allreduce started on the communication stream as backward fills it,
// the compute stream's wait for the reductions (an event, not the host), the optimizer. Returns once the
// batch is on the device; the step itself may still be running. The observer (runtime/engine/
// step_observer.h) keeps the log lines' sums and the timeline's marks.
template <typename T>
void CudaEngine<T>::run_step(const data::Batch& batch, double learning_rate) {
  try {
    enqueue_step(batch, learning_rate);
  } catch (const cuda::DeviceOutOfMemory& error) {
    throw ConfigError(does_not_fit(settings_, comm_.rank(), error.what()));
  }
}

template <typename T>
void CudaEngine<T>::enqueue_step(const data::Batch& batch, double learning_rate) {
  observer_.step_begins();
  const int slot = take_batch(batch);
  observer_.mark(timeline::Mark::forward_begin);
  reducer_.begin_step();
  const model::DeviceStepResult result = model_.forward_and_loss(
      images_for_model(slot, pixels(batch)), static_cast<const std::int32_t*>(labels_[slot].get()), batch.size,
      static_cast<float>(settings_.label_smoothing), /*gradient_scale=*/1.0f);  // ncclAvg averages
  model_.backward([&](int p) { reducer_.tensor_ready(p); }, {});
  observer_.waiting_for_reductions();
  reducer_.finish();
  observer_.reductions_done();
  model_.sgd_step(optimizer_options(settings_, learning_rate));
  observer_.step_done(result, batch.size);
  TRAIN_CUDA_CHECK(cudaEventRecord(consumed_[slot].get(), compute_.get()));
  ++steps_;
  wait_for(uploaded_[slot].get(), "the copy of a batch to the GPU");  // the trainer may refill the batch now
}

// The batch to upload slot steps_ % 2 on the copy stream, and the compute stream's wait for it. The slot is
// free once the step two back has run (it read these buffers until its backward ended).
template <typename T>
int CudaEngine<T>::take_batch(const data::Batch& batch) {
  const int64_t count = pixels(batch);
  const int slot = static_cast<int>(steps_ % 2);
  std::memcpy(host_labels_[slot].get(), batch.labels.data(), sizeof(std::int32_t) * static_cast<size_t>(batch.size));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), consumed_[slot].get(), 0));
  observer_.mark(timeline::Mark::upload_begin, StepLane::copy);
  const size_t image_bytes = sizeof(float) * static_cast<size_t>(count);
  const size_t label_bytes = sizeof(std::int32_t) * static_cast<size_t>(batch.size);
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(images_[slot].get(), batch.images.data(), image_bytes, cudaMemcpyHostToDevice,
                                   copy_.get()));
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(labels_[slot].get(), host_labels_[slot].get(), label_bytes, cudaMemcpyHostToDevice,
                                   copy_.get()));
  observer_.mark(timeline::Mark::upload_end, StepLane::copy);
  if (observer_.marked()) probe_.set_upload_bytes(image_bytes + label_bytes);
  TRAIN_CUDA_CHECK(cudaEventRecord(uploaded_[slot].get(), copy_.get()));
  // Before its wait for the upload: the stream reaches the step once it is done with what came before.
  observer_.mark(timeline::Mark::compute_begin);
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), uploaded_[slot].get(), 0));
  return slot;
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
