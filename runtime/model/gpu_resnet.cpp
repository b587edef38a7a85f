#include "runtime/model/gpu_resnet.h"

#include "kernels/cuda/cuda_check.h"
#include "runtime/model/gpu_resnet_kernels.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace train::model {

namespace {

namespace cuda = kernels::cuda;

constexpr float bn_eps = static_cast<float>(bn_epsilon);
constexpr float bn_mom = static_cast<float>(bn_momentum);

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

template <typename T>
void* GpuResNet<T>::allocate_bytes(size_t bytes) {
  cuda::DeviceMemory memory = cuda::try_allocate_device(bytes);
  if (!memory) {
    throw cuda::DeviceOutOfMemory(fmt::format("allocating {:.2f} GiB more after {:.2f} GiB for the model failed",
                                              static_cast<double>(bytes) / (1 << 30),
                                              static_cast<double>(device_bytes_) / (1 << 30)));
  }
  memory_.push_back(std::move(memory));
  device_bytes_ += bytes;
  return memory_.back().get();
}

template <typename T>
GpuResNet<T>::GpuResNet(ResNetPlan plan, comm::GradientViews<float> reduced, kernels::cuda::Context& context)
    : Passes(std::move(plan), *reduced.plan),
      context_(context),
      gradient_elements_(reduced.elements()),
      reduced_(reduced.values) {
  const ResNetPlan& p = this->plan_;
  const size_t parameters = p.parameter_elements;
  master_ = allocate<float>(parameters);
  if constexpr (std::is_same_v<T, float>) {
    weights_ = master_;
  } else {
    weights_ = allocate<T>(parameters);
    bn_gradient_scratch_ = allocate<float>(2 * static_cast<size_t>(p.max_bn_channels));
  }
  if constexpr (std::is_same_v<T, float>) {
    gradients_ = reduced_;
  } else {
    gradients_ = allocate<T>(gradient_elements_);
  }
  momentum_ = allocate<float>(parameters);
  buffers_ = allocate<float>(p.float_buffer_elements);
  loss_ = allocate<float>(1);
  correct_ = allocate<std::int32_t>(1);
  saved_ = this->template allocate_storage<float>();  // activation 0, the images, is the caller's

  // Initial contents: zero parameters, gradients and momentum; running statistics 0 and 1 (torchvision's).
  cudaStream_t stream = context_.stream();
  TRAIN_CUDA_CHECK(cudaMemsetAsync(master_, 0, sizeof(float) * parameters, stream));
  if (static_cast<void*>(weights_) != static_cast<void*>(master_)) {
    TRAIN_CUDA_CHECK(cudaMemsetAsync(weights_, 0, sizeof(T) * parameters, stream));
  }
  // The padding between tensors is reduced with them: it must be (and stays) zero.
  TRAIN_CUDA_CHECK(cudaMemsetAsync(gradients_, 0, sizeof(T) * gradient_elements_, stream));
  if (static_cast<void*>(reduced_) != static_cast<void*>(gradients_)) {
    TRAIN_CUDA_CHECK(cudaMemsetAsync(reduced_, 0, sizeof(float) * gradient_elements_, stream));
  }
  TRAIN_CUDA_CHECK(cudaMemsetAsync(momentum_, 0, sizeof(float) * parameters, stream));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(loss_, 0, sizeof(float), stream));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(correct_, 0, sizeof(std::int32_t), stream));
  std::vector<float> initial_buffers(p.float_buffer_elements, 0.0f);
  for (size_t i = 0; i < p.spec.tensors.size(); ++i) {
    const auto& tensor = p.spec.tensors[i];
    if (tensor.role == TensorRole::bn_running_var) {
      std::fill_n(initial_buffers.begin() + static_cast<std::ptrdiff_t>(p.buffer_offset[i]), tensor.elements(), 1.0f);
    }
  }
  copy_to_device(buffers_, initial_buffers.data(), sizeof(float) * initial_buffers.size());

  // The optimizer's table (the fp32 master weights, the fp32 gradients it reads, the momentum) and, with
  // T = bf16, the copy the passes read, rewritten by every update. Uploaded once; the table's constructor
  // synchronises.
  std::vector<cuda::SgdTensor<T>> tensors =
      this->template optimizer_tensors<cuda::SgdTensor<T>>(master_, reduced_, momentum_);
  if constexpr (!std::is_same_v<T, float>) {
    for (size_t i = 0; i < tensors.size(); ++i) tensors[i].param_copy = weights_ + this->parameters_[i].offset;
  }
  sgd_table_ = std::make_unique<cuda::SgdTensorTable<T>>(context_, std::span<const cuda::SgdTensor<T>>(tensors));

  // The convolutions' algorithms chosen now and their largest workspace taken now: a step then allocates
  // nothing, and a batch that does not fit is found here, not in the first step.
  size_t workspace = 0;
  for (const auto& shape : this->conv_shapes_at_max_batch()) {
    workspace = std::max(workspace, cuda::conv2d_workspace_bytes<T>(context_, shape));
  }
  context_.reserve_workspace(workspace);
}

template <typename T>
GpuResNet<T>::~GpuResNet() {
  // Work still queued may use this memory: let it finish first (cudaFree would wait for the device anyway).
  cudaStreamSynchronize(context_.stream());
}

// ---- state transfer ------------------------------------------------------------------------------------------

template <typename T>
void GpuResNet<T>::copy_to_device(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, context_.stream()));
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));  // the host memory may go away after return
}

template <typename T>
void GpuResNet<T>::copy_to_host(void* host, const void* device, size_t bytes) const {
  if (bytes == 0) return;
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, context_.stream()));
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
}

namespace {
void check_count(const char* what, size_t given, size_t expected) {
  if (given != expected) throw std::invalid_argument(fmt::format("{}: {} values where the model has {}", what, given, expected));
}
}  // namespace

template <typename T>
void GpuResNet<T>::upload_parameters(const std::vector<float>& values) {
  check_count("upload_parameters", values.size(), parameter_elements());
  copy_to_device(master_, values.data(), sizeof(float) * values.size());
  if constexpr (!std::is_same_v<T, float>) {
    cuda::cast<float, T>(context_, static_cast<std::int64_t>(values.size()), master_, weights_);
    TRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
  }
}

template <typename T>
std::vector<float> GpuResNet<T>::download_floats(const float* device, size_t count) const {
  std::vector<float> values(count);
  copy_to_host(values.data(), device, sizeof(float) * count);
  return values;
}

template <typename T>
std::vector<float> GpuResNet<T>::download_parameters() const {
  return download_floats(master_, parameter_elements());
}

template <typename T>
std::vector<float> GpuResNet<T>::download_gradients() const {
  std::vector<float> values(gradient_elements_);
  if constexpr (std::is_same_v<T, float>) {
    copy_to_host(values.data(), gradients_, sizeof(float) * values.size());
  } else {
    static_assert(sizeof(T) == sizeof(std::uint16_t));
    std::vector<std::uint16_t> bits(values.size());
    copy_to_host(bits.data(), gradients_, sizeof(T) * bits.size());
    for (size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_float(bits[i]);
  }
  return values;
}

template <typename T>
std::vector<float> GpuResNet<T>::download_reduced_gradients() const {
  return download_floats(reduced_, gradient_elements_);
}

template <typename T>
void GpuResNet<T>::widen_gradients(size_t begin, size_t end) {
  if constexpr (!std::is_same_v<T, float>) {
    if (end > begin) cuda::cast<T, float>(context_, static_cast<std::int64_t>(end - begin), gradients_ + begin, reduced_ + begin);
  }
}

template <typename T>
std::vector<float> GpuResNet<T>::download_momentum() const {
  return download_floats(momentum_, parameter_elements());
}

template <typename T>
void GpuResNet<T>::upload_momentum(const std::vector<float>& values) {
  check_count("upload_momentum", values.size(), parameter_elements());
  copy_to_device(momentum_, values.data(), sizeof(float) * values.size());
}

namespace {
const TensorSpec& float_buffer_spec(const ResNetSpec& spec, int spec_index) {
  const auto& tensor = spec.tensors.at(static_cast<size_t>(spec_index));
  if (tensor.role != TensorRole::bn_running_mean && tensor.role != TensorRole::bn_running_var) {
    throw std::invalid_argument(tensor.name + " is not a running_mean or running_var buffer");
  }
  return tensor;
}
}  // namespace

template <typename T>
std::vector<float> GpuResNet<T>::download_buffer(int spec_index) const {
  const auto& tensor = float_buffer_spec(this->plan_.spec, spec_index);
  return download_floats(buffers_ + this->plan_.buffer_offset[static_cast<size_t>(spec_index)],
                         static_cast<size_t>(tensor.elements()));
}

template <typename T>
void GpuResNet<T>::upload_buffer(int spec_index, const std::vector<float>& values) {
  const auto& tensor = float_buffer_spec(this->plan_.spec, spec_index);
  check_count(tensor.name.c_str(), values.size(), static_cast<size_t>(tensor.elements()));
  copy_to_device(buffer(spec_index), values.data(), sizeof(float) * values.size());
}

template <typename T>
void GpuResNet<T>::upload_state(const HostModelState& state) {
  check_count("upload_state: BN buffers", state.float_buffers.size(), this->plan_.float_buffer_elements);
  check_count("upload_state: BN counters", state.tracked.size(), this->plan_.tracked_buffers);
  upload_parameters(state.parameters);
  copy_to_device(buffers_, state.float_buffers.data(), sizeof(float) * state.float_buffers.size());
  this->tracked_ = state.tracked;
}

template <typename T>
HostModelState GpuResNet<T>::download_state() const {
  HostModelState state;
  state.parameters = download_parameters();
  state.float_buffers = download_floats(buffers_, this->plan_.float_buffer_elements);
  state.tracked = this->tracked_;
  return state;
}

template <typename T>
ExportedTensors GpuResNet<T>::export_state() const {
  const HostModelState state = download_state();
  return export_model_state(this->plan_, state.parameters.data(), state.float_buffers.data(), state.tracked.data());
}

// ---- the op calls of ResNetPasses ----------------------------------------------------------------------------

template <typename T>
void GpuResNet<T>::conv_forward(const LayerPlan& layer, const kernels::Conv2dShape& shape, const T* x, T* y) {
  cuda::conv2d_forward<T>(context_, shape, x, weight_data(layer.weight), y);
}

template <typename T>
void GpuResNet<T>::conv_backward_weight(const LayerPlan& layer, const kernels::Conv2dShape& shape, const T* x,
                                        const T* dy) {
  cuda::conv2d_backward_weight<T>(context_, shape, x, dy, gradient_data(layer.weight));
}

template <typename T>
void GpuResNet<T>::conv_backward_input(const LayerPlan& layer, const kernels::Conv2dShape& shape, const T* dy, T* dx) {
  cuda::conv2d_backward_input<T>(context_, shape, dy, weight_data(layer.weight), dx);
}

template <typename T>
void GpuResNet<T>::bn_forward_train(size_t l, int64_t rows, int channels, const T* x, const T* shortcut, bool relu,
                                    T* y) {
  const LayerPlan& layer = this->plan_.layers[l];
  const auto& saved = saved_[l];
  const float* gamma = master_data(layer.weight);
  const float* beta = master_data(layer.bias);
  if (relu) {
    cuda::batch_norm_relu_forward_train<T>(context_, rows, channels, x, shortcut, gamma, beta, bn_eps, bn_mom,
                                           buffer(layer.running_mean), buffer(layer.running_var), y, saved.mean,
                                           saved.invstd);
  } else {
    cuda::batch_norm_forward_train<T>(context_, rows, channels, x, gamma, beta, bn_eps, bn_mom,
                                      buffer(layer.running_mean), buffer(layer.running_var), y, saved.mean,
                                      saved.invstd);
  }
}

template <typename T>
void GpuResNet<T>::bn_forward_inference(const LayerPlan& layer, int64_t rows, int channels, const T* x, T* y) {
  cuda::batch_norm_forward_inference<T>(context_, rows, channels, x, master_data(layer.weight), master_data(layer.bias),
                                        buffer(layer.running_mean), buffer(layer.running_var), bn_eps, y);
}

template <typename T>
void GpuResNet<T>::bn_backward(size_t l, int64_t rows, int channels, const T* x, const T* relu_y, const T* dy, T* dx) {
  const LayerPlan& layer = this->plan_.layers[l];
  const auto& saved = saved_[l];
  // The ops write dgamma/dbeta in fp32: straight into the gradient buffer when T is float, else into
  // scratch and cast into the bf16 buffer.
  float* dgamma;
  float* dbeta;
  if constexpr (std::is_same_v<T, float>) {
    dgamma = gradient_data(layer.weight);
    dbeta = gradient_data(layer.bias);
  } else {
    dgamma = bn_gradient_scratch_;
    dbeta = bn_gradient_scratch_ + this->plan_.max_bn_channels;
  }
  if (relu_y != nullptr) {
    cuda::batch_norm_relu_backward<T>(context_, rows, channels, x, relu_y, dy, master_data(layer.weight),
                                      saved.mean, saved.invstd, dx, dgamma, dbeta);
  } else {
    cuda::batch_norm_backward<T>(context_, rows, channels, x, dy, master_data(layer.weight), saved.mean,
                                 saved.invstd, dx, dgamma, dbeta);
  }
  if constexpr (!std::is_same_v<T, float>) {
    cuda::cast<float, T>(context_, channels, dgamma, gradient_data(layer.weight));
    cuda::cast<float, T>(context_, channels, dbeta, gradient_data(layer.bias));
  }
}

template <typename T>
void GpuResNet<T>::relu_forward(int64_t n, const T* x, T* y) {
  cuda::relu_forward<T>(context_, n, x, y);
}

template <typename T>
void GpuResNet<T>::relu_backward(int64_t n, const T* y, const T* dy, T* dx) {
  cuda::relu_backward<T>(context_, n, y, dy, dx);
}

template <typename T>
void GpuResNet<T>::add(int64_t n, const T* a, const T* b, T* y) {
  cuda::add<T>(context_, n, a, b, y);
}

template <typename T>
void GpuResNet<T>::copy(int64_t n, const T* x, T* y) {
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(y, x, sizeof(T) * static_cast<size_t>(n), cudaMemcpyDeviceToDevice, context_.stream()));
}

template <typename T>
void GpuResNet<T>::max_pool_forward(size_t l, const kernels::Pool2dShape& shape, const T* x, T* y) {
  cuda::max_pool_forward<T>(context_, shape, x, y, saved_[l].argmax);
}

template <typename T>
void GpuResNet<T>::max_pool_backward(size_t l, const kernels::Pool2dShape& shape, const T* dy, T* dx) {
  cuda::max_pool_backward<T>(context_, shape, dy, saved_[l].argmax, dx);
}

template <typename T>
void GpuResNet<T>::avg_pool_forward(int n, int hw, int c, const T* x, T* y) {
  cuda::global_avg_pool_forward<T>(context_, n, hw, c, x, y);
}

template <typename T>
void GpuResNet<T>::avg_pool_backward(int n, int hw, int c, const T* dy, T* dx) {
  cuda::global_avg_pool_backward<T>(context_, n, hw, c, dy, dx);
}

template <typename T>
void GpuResNet<T>::fc_forward(const LayerPlan& layer, int n, int in, int out, const T* x, T* y) {
  cuda::fully_connected_forward<T>(context_, n, in, out, x, weight_data(layer.weight), weight_data(layer.bias), y);
}

template <typename T>
void GpuResNet<T>::fc_backward(const LayerPlan& layer, int n, int in, int out, const T* x, const T* dy, T* dx) {
  cuda::fully_connected_backward<T>(context_, n, in, out, x, weight_data(layer.weight), dy, dx,
                                    gradient_data(layer.weight), gradient_data(layer.bias));
}

// ---- a step --------------------------------------------------------------------------------------------------

template <typename T>
void GpuResNet<T>::infer(const T* images, int batch, T* logits) {
  this->forward(images, batch, /*training=*/false);
  const size_t bytes = sizeof(T) * static_cast<size_t>(int64_t{batch} * this->spec().num_classes);
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(logits, this->logits(), bytes, cudaMemcpyDeviceToDevice, context_.stream()));
}

template <typename T>
typename GpuResNet<T>::DeviceStepResult GpuResNet<T>::forward_and_loss(const T* images, const std::int32_t* labels,
                                                                      int batch, float label_smoothing,
                                                                      float gradient_scale) {
  this->forward(images, batch, /*training=*/true);
  cudaStream_t stream = context_.stream();
  const int classes = this->spec().num_classes;
  const T* logits = this->logits();
  detail::count_top1<T>(stream, batch, classes, logits, labels, correct_);
  T* dlogits = this->begin_backward();
  cuda::softmax_cross_entropy<T>(context_, batch, classes, logits, labels, label_smoothing, loss_, dlogits);
  if (gradient_scale != 1.0f) detail::scale_values<T>(stream, int64_t{batch} * classes, dlogits, gradient_scale);
  return DeviceStepResult{loss_, correct_};
}

template <typename T>
typename GpuResNet<T>::StepResult GpuResNet<T>::read_step_result() {
  float loss = 0.0f;
  std::int32_t correct = 0;
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(&loss, loss_, sizeof loss, cudaMemcpyDeviceToHost, context_.stream()));
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(&correct, correct_, sizeof correct, cudaMemcpyDeviceToHost, context_.stream()));
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
  return StepResult{loss, correct};
}

template <typename T>
void GpuResNet<T>::sgd_step(const kernels::SgdOptions& options) {
  cuda::sgd_step<T>(context_, *sgd_table_, options);
}

template <typename T>
const float* GpuResNet<T>::trust_ratios() const {
  return sgd_table_->trust_ratios();
}

template class GpuResNet<float>;
template class GpuResNet<cuda::bf16>;

}  // namespace train::model
