#include "runtime/cuda_engine.h"

#include "common/config_error.h"
#include "kernels/cuda/context.h"
#include "kernels/cuda/ops_cuda.h"
#include "runtime/comm/gradient_reducer_nccl.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/comm/nccl_check.h"
#include "runtime/comm/nccl_communicator.h"
#include "runtime/model/gpu_resnet.h"
#include "runtime/model/model_state.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstring>
#include <stdexcept>
#include <thread>
#include <type_traits>

namespace train {

namespace {

namespace cuda = ops::cuda;

// Owning handles of what the engine creates; destroying them never throws.
struct StreamDestroy {
  void operator()(cudaStream_t stream) const noexcept { cudaStreamDestroy(stream); }
};
using Stream = std::unique_ptr<std::remove_pointer_t<cudaStream_t>, StreamDestroy>;
struct EventDestroy {
  void operator()(cudaEvent_t event) const noexcept { cudaEventDestroy(event); }
};
using Event = std::unique_ptr<std::remove_pointer_t<cudaEvent_t>, EventDestroy>;
struct PinnedFree {
  void operator()(void* pointer) const noexcept { cudaFreeHost(pointer); }
};
using PinnedMemory = std::unique_ptr<void, PinnedFree>;

Stream make_stream() {
  cudaStream_t stream = nullptr;
  TRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return Stream(stream);
}

Event make_event() {
  cudaEvent_t event = nullptr;
  TRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return Event(event);
}

PinnedMemory make_pinned(size_t bytes) {
  void* pointer = nullptr;
  TRAIN_CUDA_CHECK(cudaHostAlloc(&pointer, bytes == 0 ? 1 : bytes, cudaHostAllocPortable));
  return PinnedMemory(pointer);
}

gpu::detail::DeviceMemory make_device(size_t bytes) {
  void* pointer = gpu::detail::device_malloc_or_null(bytes);
  if (pointer == nullptr) {
    throw gpu::DeviceOutOfMemory(fmt::format("the input buffers ({} bytes) do not fit on the GPU", bytes));
  }
  return gpu::detail::DeviceMemory(pointer);
}

template <typename T>
class CudaEngine final : public Engine {
 public:
  CudaEngine(const TrainingSettings& settings, int classes, MPI_Comm comm, std::chrono::milliseconds timeout);
  ~CudaEngine() override;

  std::string describe() const override;
  const ResNetPlan& plan() const override { return model_.plan(); }
  size_t gradient_buckets() const override { return model_.bucket_plan().buckets.size(); }

  void initialize(uint64_t seed) override;
  void import_model(const std::vector<model_io::Tensor>& tensors) override;
  void import_momentum(const std::vector<model_io::Tensor>& tensors) override;
  ExportedTensors export_model() override;
  ExportedTensors export_momentum() override;
  std::vector<float> parameters() override;

  void train_step(const data::Batch& batch, double learning_rate) override;
  StepTotals take_totals() override;
  void infer(const data::Batch& batch, float* logits) override;

 private:
  static constexpr bool is_bf16 = !std::is_same_v<T, float>;
  int64_t pixels(const data::Batch& batch) const;
  const T* images_for_model(int slot, int64_t count);
  // Waits for `event` in short polls, at most the step timeout, watching NCCL for a failed peer.
  void wait_for(cudaEvent_t event, const char* what) { comm_.wait_for_event(event, timeout_, what); }
  void drain(const char* what);  // waits for everything queued on the compute stream

  const TrainingSettings& settings_;
  std::chrono::milliseconds timeout_;
  int device_ = 0;
  Stream compute_, copy_;
  cuda::Context context_;
  gpu::NcclCommunicator comm_;
  gpu::GpuResNet<T> model_;
  gpu::NcclGradientReducer reducer_;
  // Two upload slots: step k's batch goes to slot k % 2 while step k - 1 computes from the other one.
  gpu::detail::DeviceMemory images_[2], labels_[2];
  PinnedMemory host_labels_[2];
  gpu::detail::DeviceMemory model_images_;  // bf16: the images as the model reads them
  gpu::detail::DeviceMemory logits_, float_logits_;
  PinnedMemory host_logits_;
  Event uploaded_[2], consumed_[2], drained_;
  int64_t steps_ = 0, steps_since_totals_ = 0;
};

template <typename T>
CudaEngine<T>::CudaEngine(const TrainingSettings& settings, int classes, MPI_Comm comm,
                          std::chrono::milliseconds timeout)
    : settings_(settings),
      timeout_(timeout),
      compute_(make_stream()),
      copy_(make_stream()),
      context_(compute_.get()),
      comm_(comm, timeout),
      model_(make_model<gpu::GpuResNet<T>>(settings, classes, context_)),
      reducer_(comm_, model_.bucket_plan(), model_.gradients(), is_bf16 ? ncclBfloat16 : ncclFloat32, compute_.get(),
               timeout, ncclAvg) {
  TRAIN_CUDA_CHECK(cudaGetDevice(&device_));
  const ResNetPlan& p = model_.plan();
  const size_t image_values = static_cast<size_t>(p.max_batch) * static_cast<size_t>(p.height * p.width * 3);
  const size_t logit_values = static_cast<size_t>(p.max_batch) * static_cast<size_t>(p.spec.num_classes);
  for (int slot = 0; slot < 2; ++slot) {
    images_[slot] = make_device(sizeof(float) * image_values);
    labels_[slot] = make_device(sizeof(std::int32_t) * static_cast<size_t>(p.max_batch));
    host_labels_[slot] = make_pinned(sizeof(std::int32_t) * static_cast<size_t>(p.max_batch));
    uploaded_[slot] = make_event();
    consumed_[slot] = make_event();
  }
  if constexpr (is_bf16) {
    model_images_ = make_device(sizeof(T) * image_values);
    float_logits_ = make_device(sizeof(float) * logit_values);
  }
  logits_ = make_device(sizeof(T) * logit_values);
  host_logits_ = make_pinned(sizeof(float) * logit_values);
  drained_ = make_event();
}

template <typename T>
CudaEngine<T>::~CudaEngine() {
  // Nothing may still run when the memory it uses is freed. If the queue does not drain within the bound
  // (a peer gone in the middle of an allreduce), aborting NCCL ends the stuck collectives so it can.
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

template <typename T>
int64_t CudaEngine<T>::pixels(const data::Batch& batch) const {
  const ResNetPlan& p = model_.plan();
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
  const int64_t count = pixels(batch);
  const int slot = static_cast<int>(steps_ % 2);
  // The slot is free once the step two back has run (it read these buffers until its backward ended).
  std::memcpy(host_labels_[slot].get(), batch.labels.data(), sizeof(std::int32_t) * static_cast<size_t>(batch.size));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(copy_.get(), consumed_[slot].get(), 0));
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(images_[slot].get(), batch.images.data(), sizeof(float) * static_cast<size_t>(count),
                                   cudaMemcpyHostToDevice, copy_.get()));
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(labels_[slot].get(), host_labels_[slot].get(),
                                   sizeof(std::int32_t) * static_cast<size_t>(batch.size), cudaMemcpyHostToDevice,
                                   copy_.get()));
  TRAIN_CUDA_CHECK(cudaEventRecord(uploaded_[slot].get(), copy_.get()));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(compute_.get(), uploaded_[slot].get(), 0));

  reducer_.begin_step();
  model_.train_step(images_for_model(slot, count), static_cast<const std::int32_t*>(labels_[slot].get()), batch.size,
                    static_cast<float>(settings_.label_smoothing), /*gradient_scale=*/1.0f,  // ncclAvg averages
                    [&](int p) { reducer_.tensor_ready(p); });
  reducer_.finish();  // the compute stream waits for every bucket's allreduce
  model_.sgd_step(optimizer_options(settings_, learning_rate));
  TRAIN_CUDA_CHECK(cudaEventRecord(consumed_[slot].get(), compute_.get()));
  ++steps_;
  ++steps_since_totals_;
  wait_for(uploaded_[slot].get(), "the copy of a batch to the GPU");  // the trainer may refill the batch now
}

template <typename T>
StepTotals CudaEngine<T>::take_totals() {
  drain("the steps' loss and hits");
  const auto totals = model_.take_totals();
  StepTotals result{totals.loss, totals.images, totals.correct, steps_since_totals_};
  steps_since_totals_ = 0;
  return result;
}

template <typename T>
void CudaEngine<T>::infer(const data::Batch& batch, float* logits) {
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
  const ResNetPlan& p = model_.plan();
  HostModelState state{std::vector<float>(p.parameter_elements), std::vector<float>(p.float_buffer_elements),
                       std::vector<int64_t>(p.tracked_buffers)};
  initialize_resnet(p, seed, state.parameters.data(), state.float_buffers.data(), state.tracked.data());
  model_.upload_state(state);
  model_.upload_momentum(std::vector<float>(p.parameter_elements, 0.0f));
}

template <typename T>
void CudaEngine<T>::import_model(const std::vector<model_io::Tensor>& tensors) {
  drain("the GPU before loading weights");
  HostModelState state = model_.download_state();
  import_model_state(model_.plan(), tensors, state.parameters.data(), state.float_buffers.data(), state.tracked.data());
  model_.upload_state(state);
}

template <typename T>
void CudaEngine<T>::import_momentum(const std::vector<model_io::Tensor>& tensors) {
  drain("the GPU before loading momentum");
  std::vector<float> momentum = model_.download_momentum();
  train::import_momentum(model_.plan(), tensors, momentum.data());
  model_.upload_momentum(momentum);
}

template <typename T>
ExportedTensors CudaEngine<T>::export_model() {
  drain("the GPU before reading the model");
  return model_.export_state();
}

template <typename T>
ExportedTensors CudaEngine<T>::export_momentum() {
  drain("the GPU before reading momentum");
  const std::vector<float> momentum = model_.download_momentum();
  return train::export_momentum(model_.plan(), momentum.data());
}

template <typename T>
std::vector<float> CudaEngine<T>::parameters() {
  drain("the GPU before reading the parameters");
  return model_.download_parameters();
}

}  // namespace

std::unique_ptr<Engine> make_cuda_engine(const TrainingSettings& settings, int classes, const RankIdentity& identity,
                                         MPI_Comm comm, std::chrono::milliseconds timeout) {
  gpu::set_error_rank(identity.rank);
  try {
    if (settings.precision == Precision::bfloat16) {
      return std::make_unique<CudaEngine<__nv_bfloat16>>(settings, classes, comm, timeout);
    }
    return std::make_unique<CudaEngine<float>>(settings, classes, comm, timeout);
  } catch (const gpu::DeviceOutOfMemory& error) {
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    throw ConfigError(fmt::format(
        "rank {}: resnet{} with {} images of {}x{} per rank in {} does not fit on this GPU ({:.1f} GiB): {}; lower "
        "mini_batch_size (images per host, split over its ranks) or image_shape",
        identity.rank, settings.depth, settings.batch_per_rank, settings.height, settings.width,
        precision_name(settings.precision), static_cast<double>(total_bytes) / (1 << 30), error.what()));
  }
}

}  // namespace train
