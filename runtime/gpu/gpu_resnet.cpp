#include "runtime/gpu/gpu_resnet.h"

#include "kernels/cuda/cuda_check.h"
#include "runtime/gpu/gpu_resnet_kernels.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace train::gpu {

namespace detail {
void DeviceFree::operator()(void* pointer) const noexcept {
  // cudaFree waits for the device; a destructor cannot report a failure.
  if (pointer != nullptr) cudaFree(pointer);
}
}  // namespace detail

namespace {

namespace cuda = ops::cuda;

// As CpuResNet (runtime/cpu_resnet.cpp).
constexpr float bn_epsilon = 1e-5f;
constexpr float bn_momentum = 0.1f;
constexpr size_t first_bucket_bytes = 1 << 20;

float bf16_to_float(std::uint16_t bits) {
  const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

template <typename T>
void* GpuResNet<T>::allocate(size_t bytes) {
  void* pointer = nullptr;
  TRAIN_CUDA_CHECK(cudaMalloc(&pointer, bytes == 0 ? 1 : bytes));
  memory_.emplace_back(pointer);
  device_bytes_ += bytes;
  return pointer;
}

template <typename T>
GpuResNet<T>::GpuResNet(ResNetSpec spec, int max_batch, int height, int width, size_t bucket_bytes,
                        ops::cuda::Context& context)
    : context_(context), spec_(std::move(spec)), max_batch_(max_batch), height_(height), width_(width) {
  if (max_batch < 2) throw std::invalid_argument("batch norm in training mode needs at least 2 images per rank");
  // Parameters, buffers and the bucket plan: the same walk as CpuResNet's constructor, so offsets agree.
  std::map<std::string, int> spec_index;
  std::vector<int> parameter_of_spec(spec_.tensors.size(), -1);
  std::vector<size_t> elements;
  buffer_offset_.assign(spec_.tensors.size(), 0);
  size_t float_buffer_size = 0;
  for (size_t i = 0; i < spec_.tensors.size(); ++i) {
    const auto& tensor = spec_.tensors[i];
    spec_index[tensor.name] = static_cast<int>(i);
    if (tensor.is_parameter()) {
      parameter_of_spec[i] = static_cast<int>(parameters_.size());
      parameters_.push_back(Parameter{static_cast<int>(i), parameter_elements_, 0, tensor.elements()});
      parameter_elements_ += static_cast<size_t>(tensor.elements());
      elements.push_back(static_cast<size_t>(tensor.elements()));
    } else if (tensor.role == TensorRole::bn_batches_tracked) {
      buffer_offset_[i] = tracked_.size();
      tracked_.push_back(0);
    } else {
      buffer_offset_[i] = float_buffer_size;
      float_buffer_size += static_cast<size_t>(tensor.elements());
    }
  }
  plan_ = plan_buckets(elements, bucket_bytes, first_bucket_bytes);
  for (size_t p = 0; p < parameters_.size(); ++p) parameters_[p].gradient_offset = plan_.offset_of_tensor[p];

  auto parameter = [&](const std::string& name) {
    auto it = spec_index.find(name);
    if (it == spec_index.end() || parameter_of_spec[static_cast<size_t>(it->second)] < 0) {
      throw std::logic_error("ResNet spec lacks parameter " + name);
    }
    return parameter_of_spec[static_cast<size_t>(it->second)];
  };
  auto buffer_index = [&](const std::string& name) { return spec_index.at(name); };

  // Shapes at the largest batch (CpuResNet's walk).
  max_shapes_.assign(static_cast<size_t>(spec_.activation_count), {});
  max_shapes_[0] = {max_batch, height, width, 3};
  layer_state_.resize(spec_.layers.size());
  size_t saved_statistics = 0, argmax_elements = 0;
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    const auto& layer = spec_.layers[l];
    auto& state = layer_state_[l];
    const ActivationShape in = max_shapes_[static_cast<size_t>(layer.input)];
    ActivationShape out = in;
    switch (layer.kind) {
      case LayerKind::conv: {
        auto shape = ops::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel, layer.stride,
                                              layer.padding);
        out = {in.n, shape.out_h(), shape.out_w(), layer.out_channels};
        state.weight = parameter(layer.name + ".weight");
        break;
      }
      case LayerKind::batch_norm:
        state.weight = parameter(layer.name + ".weight");
        state.bias = parameter(layer.name + ".bias");
        state.running_mean = buffer_index(layer.name + ".running_mean");
        state.running_var = buffer_index(layer.name + ".running_var");
        state.tracked = buffer_index(layer.name + ".num_batches_tracked");
        saved_statistics += 2 * static_cast<size_t>(in.c);
        max_bn_channels_ = std::max(max_bn_channels_, in.c);
        break;
      case LayerKind::max_pool: {
        ops::Pool2dShape pool{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding};
        out = {in.n, pool.out_h(), pool.out_w(), in.c};
        argmax_elements += static_cast<size_t>(out.size());
        break;
      }
      case LayerKind::global_avg_pool: out = {in.n, 1, 1, in.c}; break;
      case LayerKind::fully_connected:
        out = {in.n, 1, 1, layer.out_channels};
        state.weight = parameter(layer.name + ".weight");
        state.bias = parameter(layer.name + ".bias");
        break;
      case LayerKind::relu:
      case LayerKind::residual_add: break;
    }
    if (out.h < 1 || out.w < 1) {
      throw std::invalid_argument(fmt::format("input {}x{} is too small for resnet{}: layer {} would have no output",
                                              height, width, spec_.depth, layer.name));
    }
    max_shapes_[static_cast<size_t>(layer.output)] = out;
  }
  shapes_ = max_shapes_;
  plan_fusion();

  // ---- device memory ----
  master_ = static_cast<float*>(allocate(sizeof(float) * parameter_elements_));
  if constexpr (std::is_same_v<T, float>) {
    weights_ = master_;
  } else {
    weights_ = static_cast<T*>(allocate(sizeof(T) * parameter_elements_));
    bn_gradient_scratch_ = static_cast<float*>(allocate(sizeof(float) * 2 * static_cast<size_t>(max_bn_channels_)));
  }
  gradients_ = static_cast<T*>(allocate(sizeof(T) * plan_.total_elements));
  momentum_ = static_cast<float*>(allocate(sizeof(float) * parameter_elements_));
  buffers_ = static_cast<float*>(allocate(sizeof(float) * float_buffer_size));
  loss_ = static_cast<float*>(allocate(sizeof(float)));
  correct_ = static_cast<std::int32_t*>(allocate(sizeof(std::int32_t)));

  auto* saved = static_cast<float*>(allocate(sizeof(float) * saved_statistics));
  auto* argmax = static_cast<std::int32_t*>(allocate(sizeof(std::int32_t) * argmax_elements));
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    const auto& layer = spec_.layers[l];
    auto& state = layer_state_[l];
    const ActivationShape& in = max_shapes_[static_cast<size_t>(layer.input)];
    if (layer.kind == LayerKind::batch_norm) {
      state.save_mean = saved;
      state.save_invstd = saved + in.c;
      saved += 2 * static_cast<size_t>(in.c);
    } else if (layer.kind == LayerKind::max_pool) {
      state.argmax = argmax;
      argmax += max_shapes_[static_cast<size_t>(layer.output)].size();
    }
  }

  // Activation storage: fused-away outputs live in the ReLU output they are fused into (see the header).
  const size_t activations = max_shapes_.size();
  std::vector<int> storage(activations);
  std::iota(storage.begin(), storage.end(), 0);
  std::vector<bool> gradient_needed(activations, true);
  gradient_needed[0] = false;  // the images
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    const auto& layer = spec_.layers[l];
    const auto& state = layer_state_[l];
    const auto output = static_cast<size_t>(layer.output);
    if (state.fusion == Fusion::bn_relu) {
      storage[output] = spec_.layers[static_cast<size_t>(state.relu_layer)].output;
      gradient_needed[output] = false;  // its backward takes the gradient at the ReLU's output
    } else if (state.fusion == Fusion::bn_in_add) {
      const auto& add = layer_state_[static_cast<size_t>(state.partner)];
      storage[output] = spec_.layers[static_cast<size_t>(add.relu_layer)].output;
    } else if (state.fusion == Fusion::bn_add_relu) {
      storage[output] = spec_.layers[static_cast<size_t>(state.relu_layer)].output;
    }
  }
  activation_.assign(activations, nullptr);
  gradient_buffer_.assign(activations, nullptr);
  int64_t largest = 0;
  for (size_t a = 1; a < activations; ++a) {
    const int64_t size = max_shapes_[a].size();
    largest = std::max(largest, size);
    if (storage[a] == static_cast<int>(a)) activation_[a] = static_cast<T*>(allocate(sizeof(T) * static_cast<size_t>(size)));
    if (gradient_needed[a]) gradient_buffer_[a] = static_cast<T*>(allocate(sizeof(T) * static_cast<size_t>(size)));
  }
  for (size_t a = 1; a < activations; ++a) {
    const auto target = static_cast<size_t>(storage[a]);
    if (storage[target] != static_cast<int>(target) || max_shapes_[target].size() != max_shapes_[a].size()) {
      throw std::logic_error("GpuResNet: an activation's storage is not an activation of its own shape");
    }
    activation_[a] = activation_[target];
  }
  scratch_ = static_cast<T*>(allocate(sizeof(T) * static_cast<size_t>(largest)));
  gradient_written_.assign(activations, false);
  gradient_of_.assign(activations, nullptr);

  // Initial contents: zero parameters, gradients and momentum; running statistics 0 and 1 (torchvision's).
  cudaStream_t stream = context_.stream();
  TRAIN_CUDA_CHECK(cudaMemsetAsync(master_, 0, sizeof(float) * parameter_elements_, stream));
  if (static_cast<void*>(weights_) != static_cast<void*>(master_)) {
    TRAIN_CUDA_CHECK(cudaMemsetAsync(weights_, 0, sizeof(T) * parameter_elements_, stream));
  }
  TRAIN_CUDA_CHECK(cudaMemsetAsync(gradients_, 0, sizeof(T) * plan_.total_elements, stream));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(momentum_, 0, sizeof(float) * parameter_elements_, stream));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(loss_, 0, sizeof(float), stream));
  TRAIN_CUDA_CHECK(cudaMemsetAsync(correct_, 0, sizeof(std::int32_t), stream));
  std::vector<float> initial_buffers(float_buffer_size, 0.0f);
  for (size_t i = 0; i < spec_.tensors.size(); ++i) {
    const auto& tensor = spec_.tensors[i];
    if (tensor.role == TensorRole::bn_running_var) {
      std::fill_n(initial_buffers.begin() + static_cast<std::ptrdiff_t>(buffer_offset_[i]), tensor.elements(), 1.0f);
    }
  }
  copy_to_device(buffers_, initial_buffers.data(), sizeof(float) * float_buffer_size);

  // The optimizer's table: every parameter, its gradient in the bucket layout, its momentum, and (bf16) the
  // copy the passes read. Uploaded once; the constructor of the table synchronises.
  std::vector<cuda::SgdTensor<T>> tensors;
  tensors.reserve(parameters_.size());
  for (const Parameter& p : parameters_) {
    cuda::SgdTensor<T> tensor;
    tensor.param = master_ + p.offset;
    tensor.grad = gradients_ + p.gradient_offset;
    tensor.momentum_buffer = momentum_ + p.offset;
    tensor.param_copy = std::is_same_v<T, float> ? nullptr : weights_ + p.offset;
    tensor.count = p.count;
    tensor.weight_decay = spec_.tensors[static_cast<size_t>(p.spec_index)].decays();
    tensors.push_back(tensor);
  }
  sgd_table_ = std::make_unique<cuda::SgdTensorTable<T>>(context_, std::span<const cuda::SgdTensor<T>>(tensors));
}

template <typename T>
GpuResNet<T>::~GpuResNet() {
  // Work still queued may use this memory: let it finish first (cudaFree would wait for the device anyway).
  cudaStreamSynchronize(context_.stream());
}

template <typename T>
void GpuResNet<T>::plan_fusion() {
  const std::vector<LayerFusion> plan = plan_layer_fusion(spec_);
  for (size_t l = 0; l < plan.size(); ++l) static_cast<LayerFusion&>(layer_state_[l]) = plan[l];
}

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

template <typename T>
void GpuResNet<T>::upload_parameters(const std::vector<float>& values) {
  if (values.size() != parameter_elements_) {
    throw std::invalid_argument(fmt::format("upload_parameters: {} values for a model of {} parameters", values.size(),
                                            parameter_elements_));
  }
  copy_to_device(master_, values.data(), sizeof(float) * parameter_elements_);
  if constexpr (!std::is_same_v<T, float>) {
    cuda::cast<float, T>(context_, static_cast<std::int64_t>(parameter_elements_), master_, weights_);
    TRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
  }
}

template <typename T>
std::vector<float> GpuResNet<T>::download_parameters() const {
  std::vector<float> values(parameter_elements_);
  copy_to_host(values.data(), master_, sizeof(float) * parameter_elements_);
  return values;
}

template <typename T>
std::vector<float> GpuResNet<T>::download_gradients() const {
  std::vector<float> values(plan_.total_elements);
  if constexpr (std::is_same_v<T, float>) {
    copy_to_host(values.data(), gradients_, sizeof(float) * values.size());
  } else {
    static_assert(sizeof(T) == sizeof(std::uint16_t));
    std::vector<std::uint16_t> bits(plan_.total_elements);
    copy_to_host(bits.data(), gradients_, sizeof(T) * bits.size());
    for (size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_float(bits[i]);
  }
  return values;
}

template <typename T>
std::vector<float> GpuResNet<T>::download_momentum() const {
  std::vector<float> values(parameter_elements_);
  copy_to_host(values.data(), momentum_, sizeof(float) * parameter_elements_);
  return values;
}

template <typename T>
void GpuResNet<T>::upload_momentum(const std::vector<float>& values) {
  if (values.size() != parameter_elements_) {
    throw std::invalid_argument(fmt::format("upload_momentum: {} values for a model of {} parameters", values.size(),
                                            parameter_elements_));
  }
  copy_to_device(momentum_, values.data(), sizeof(float) * parameter_elements_);
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
  const auto& tensor = float_buffer_spec(spec_, spec_index);
  std::vector<float> values(static_cast<size_t>(tensor.elements()));
  copy_to_host(values.data(), buffers_ + buffer_offset_[static_cast<size_t>(spec_index)],
               sizeof(float) * values.size());
  return values;
}

template <typename T>
void GpuResNet<T>::upload_buffer(int spec_index, const std::vector<float>& values) {
  const auto& tensor = float_buffer_spec(spec_, spec_index);
  if (values.size() != static_cast<size_t>(tensor.elements())) {
    throw std::invalid_argument(fmt::format("upload_buffer: {} values for {} of {}", values.size(), tensor.name,
                                            tensor.elements()));
  }
  copy_to_device(buffer(spec_index), values.data(), sizeof(float) * values.size());
}

template <typename T>
int64_t& GpuResNet<T>::batches_tracked(int spec_index) {
  if (spec_.tensors.at(static_cast<size_t>(spec_index)).role != TensorRole::bn_batches_tracked) {
    throw std::invalid_argument(spec_.tensors[static_cast<size_t>(spec_index)].name + " is not num_batches_tracked");
  }
  return tracked_.at(buffer_offset_[static_cast<size_t>(spec_index)]);
}

namespace {
// The CPU model must have this model's spec and therefore its parameter layout.
template <typename Gpu>
void check_same_layout(const Gpu& gpu, CpuResNet<float>& cpu) {
  bool same = cpu.parameter_tensors() == gpu.parameter_tensors() &&
              cpu.all_values().size() == gpu.parameter_elements() && cpu.spec().tensors.size() == gpu.spec().tensors.size();
  for (int p = 0; same && p < gpu.parameter_tensors(); ++p) {
    const auto& a = cpu.parameters()[static_cast<size_t>(p)];
    const auto& b = gpu.parameters()[static_cast<size_t>(p)];
    same = a.spec_index == b.spec_index && a.offset == b.offset && a.count == b.count;
  }
  for (size_t i = 0; same && i < gpu.spec().tensors.size(); ++i) {
    same = cpu.spec().tensors[i].name == gpu.spec().tensors[i].name && cpu.spec().tensors[i].shape == gpu.spec().tensors[i].shape;
  }
  if (!same) throw std::invalid_argument("GpuResNet: the CPU model has another spec (depth or classes differ)");
}
}  // namespace

template <typename T>
void GpuResNet<T>::initialize_from(CpuResNet<float>& model) {
  check_same_layout(*this, model);
  upload_parameters(model.all_values());
  for (size_t i = 0; i < spec_.tensors.size(); ++i) {
    const auto& tensor = spec_.tensors[i];
    const int index = static_cast<int>(i);
    if (tensor.role == TensorRole::bn_batches_tracked) {
      batches_tracked(index) = model.batches_tracked(index);
    } else if (!tensor.is_parameter()) {
      const float* values = model.buffer_data(index);
      upload_buffer(index, std::vector<float>(values, values + tensor.elements()));
    }
  }
  TRAIN_CUDA_CHECK(cudaMemsetAsync(momentum_, 0, sizeof(float) * parameter_elements_, context_.stream()));
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(context_.stream()));
}

template <typename T>
void GpuResNet<T>::copy_to(CpuResNet<float>& model) const {
  check_same_layout(*this, model);
  const std::vector<float> values = download_parameters();
  std::copy(values.begin(), values.end(), model.all_values().begin());
  for (size_t i = 0; i < spec_.tensors.size(); ++i) {
    const auto& tensor = spec_.tensors[i];
    const int index = static_cast<int>(i);
    if (tensor.role == TensorRole::bn_batches_tracked) {
      model.batches_tracked(index) = tracked_.at(buffer_offset_[i]);
    } else if (!tensor.is_parameter()) {
      const std::vector<float> buffer_values = download_buffer(index);
      std::copy(buffer_values.begin(), buffer_values.end(), model.buffer_data(index));
    }
  }
}

// ---- the passes ----------------------------------------------------------------------------------------------

template <typename T>
void GpuResNet<T>::set_batch(int batch) {
  if (batch < 1 || batch > max_batch_) {
    throw std::invalid_argument(fmt::format("batch of {} images; this model holds 1 to {}", batch, max_batch_));
  }
  for (size_t a = 0; a < shapes_.size(); ++a) shapes_[a].n = batch;
}

template <typename T>
void GpuResNet<T>::batch_norm_train(const LayerSpec& bn, LayerState& state, const T* shortcut, bool relu, T* y) {
  const ActivationShape& in = shapes_[static_cast<size_t>(bn.input)];
  const int64_t rows = int64_t{in.n} * in.h * in.w;
  const T* x = activation(bn.input);
  const float* gamma = master_data(state.weight);
  const float* beta = master_data(state.bias);
  if (relu) {
    cuda::batch_norm_relu_forward_train<T>(context_, rows, in.c, x, shortcut, gamma, beta, bn_epsilon, bn_momentum,
                                           buffer(state.running_mean), buffer(state.running_var), y, state.save_mean,
                                           state.save_invstd);
  } else {
    cuda::batch_norm_forward_train<T>(context_, rows, in.c, x, gamma, beta, bn_epsilon, bn_momentum,
                                      buffer(state.running_mean), buffer(state.running_var), y, state.save_mean,
                                      state.save_invstd);
  }
  ++batches_tracked(state.tracked);
}

template <typename T>
void GpuResNet<T>::forward(const T* images, int batch, bool training) {
  set_batch(batch);
  input_ = images;
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    const auto& layer = spec_.layers[l];
    auto& state = layer_state_[l];
    const ActivationShape& in = shapes_[static_cast<size_t>(layer.input)];
    const T* x = activation(layer.input);
    T* y = activation_[static_cast<size_t>(layer.output)];
    switch (layer.kind) {
      case LayerKind::conv:
        cuda::conv2d_forward<T>(context_,
                                ops::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel,
                                                         layer.stride, layer.padding),
                                x, weight_data(state.weight), y);
        break;
      case LayerKind::batch_norm: {
        const int64_t rows = int64_t{in.n} * in.h * in.w;
        if (training) {
          if (state.fusion == Fusion::bn_relu) {
            batch_norm_train(layer, state, nullptr, true, relu_output(state));
          } else if (state.fusion != Fusion::bn_in_add) {
            batch_norm_train(layer, state, nullptr, false, y);
          }
        } else {
          // y may be the storage of the ReLU (or add) this BN is fused with in training; that layer then
          // runs in place (relu_forward and add allow y == x).
          cuda::batch_norm_forward_inference<T>(context_, rows, in.c, x, master_data(state.weight),
                                                master_data(state.bias), buffer(state.running_mean),
                                                buffer(state.running_var), bn_epsilon, y);
        }
        break;
      }
      case LayerKind::relu:
        if (!training || state.fusion == Fusion::none) cuda::relu_forward<T>(context_, in.size(), x, y);
        break;
      case LayerKind::max_pool:
        cuda::max_pool_forward<T>(context_,
                                  ops::Pool2dShape{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding},
                                  x, y, state.argmax);
        break;
      case LayerKind::residual_add:
        if (training && state.fusion == Fusion::bn_add_relu) {
          const auto bn = static_cast<size_t>(state.partner);
          batch_norm_train(spec_.layers[bn], layer_state_[bn], activation(layer.input_b), true, relu_output(state));
        } else {
          cuda::add<T>(context_, in.size(), x, activation(layer.input_b), y);
        }
        break;
      case LayerKind::global_avg_pool:
        cuda::global_avg_pool_forward<T>(context_, in.n, in.h * in.w, in.c, x, y);
        break;
      case LayerKind::fully_connected:
        cuda::fully_connected_forward<T>(context_, in.n, in.c, layer.out_channels, x, weight_data(state.weight),
                                         weight_data(state.bias), y);
        break;
    }
  }
}

template <typename T>
void GpuResNet<T>::infer(const T* images, int batch, T* logits) {
  forward(images, batch, /*training=*/false);
  const size_t bytes = sizeof(T) * static_cast<size_t>(int64_t{batch} * spec_.num_classes);
  TRAIN_CUDA_CHECK(
      cudaMemcpyAsync(logits, activation_.back(), bytes, cudaMemcpyDeviceToDevice, context_.stream()));
}

template <typename T>
T* GpuResNet<T>::gradient_target(int activation, bool& accumulate) {
  accumulate = gradient_written_[static_cast<size_t>(activation)];
  T* target = accumulate ? scratch_ : gradient_of_[static_cast<size_t>(activation)];
  if (target == nullptr) throw std::logic_error(fmt::format("GpuResNet: activation {} has no gradient storage", activation));
  return target;
}

template <typename T>
void GpuResNet<T>::finish_gradient(int activation, bool accumulate) {
  T* target = gradient_of_[static_cast<size_t>(activation)];
  if (accumulate) cuda::add<T>(context_, shapes_[static_cast<size_t>(activation)].size(), target, scratch_, target);
  gradient_written_[static_cast<size_t>(activation)] = true;
}

template <typename T>
typename GpuResNet<T>::DeviceStepResult GpuResNet<T>::train_step(const T* images, const std::int32_t* labels,
                                                                int batch, float label_smoothing,
                                                                float gradient_scale,
                                                                const std::function<void(int)>& on_gradient,
                                                                const std::function<void()>& between_layers) {
  forward(images, batch, /*training=*/true);
  cudaStream_t stream = context_.stream();
  const int classes = spec_.num_classes;
  const size_t last = activation_.size() - 1;
  const T* logits = activation_[last];
  detail::count_top1<T>(stream, batch, classes, logits, labels, correct_);
  gradient_of_ = gradient_buffer_;
  T* dlogits = gradient_of_[last];
  cuda::softmax_cross_entropy<T>(context_, batch, classes, logits, labels, label_smoothing, loss_, dlogits);
  if (gradient_scale != 1.0f) detail::scale_values<T>(stream, int64_t{batch} * classes, dlogits, gradient_scale);
  std::fill(gradient_written_.begin(), gradient_written_.end(), false);
  gradient_written_[last] = true;

  for (size_t l = spec_.layers.size(); l-- > 0;) {
    const auto& layer = spec_.layers[l];
    auto& state = layer_state_[l];
    if (state.fusion == Fusion::relu_in_bn) continue;  // its batch norm does its backward
    const auto input = static_cast<size_t>(layer.input);
    const ActivationShape& in = shapes_[input];
    const T* x = activation(layer.input);
    const int output = state.fusion == Fusion::bn_relu
                           ? spec_.layers[static_cast<size_t>(state.relu_layer)].output
                           : layer.output;
    const T* dy = gradient_of_[static_cast<size_t>(output)];
    if (!gradient_written_[static_cast<size_t>(output)] || dy == nullptr) {
      throw std::logic_error("no gradient reached the output of " + layer.name);
    }
    bool accumulate = false;
    switch (layer.kind) {
      case LayerKind::conv: {
        auto shape = ops::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel, layer.stride,
                                              layer.padding);
        cuda::conv2d_backward_weight<T>(context_, shape, x, dy, gradient_data(state.weight));
        if (on_gradient) on_gradient(state.weight);
        if (layer.input != 0) {  // the image needs no gradient
          T* dx = gradient_target(layer.input, accumulate);
          cuda::conv2d_backward_input<T>(context_, shape, dy, weight_data(state.weight), dx);
          finish_gradient(layer.input, accumulate);
        }
        break;
      }
      case LayerKind::batch_norm: {
        T* dx = gradient_target(layer.input, accumulate);
        const int64_t rows = int64_t{in.n} * in.h * in.w;
        // The ops write dgamma/dbeta in fp32: straight into the gradient buffer when T is float, else into
        // scratch and cast into the bf16 buffer.
        float* dgamma;
        float* dbeta;
        if constexpr (std::is_same_v<T, float>) {
          dgamma = gradient_data(state.weight);
          dbeta = gradient_data(state.bias);
        } else {
          dgamma = bn_gradient_scratch_;
          dbeta = bn_gradient_scratch_ + max_bn_channels_;
        }
        if (state.fusion == Fusion::bn_relu) {
          cuda::batch_norm_relu_backward<T>(context_, rows, in.c, x, relu_output(state), dy, master_data(state.weight),
                                            state.save_mean, state.save_invstd, dx, dgamma, dbeta);
        } else {
          cuda::batch_norm_backward<T>(context_, rows, in.c, x, dy, master_data(state.weight), state.save_mean,
                                       state.save_invstd, dx, dgamma, dbeta);
        }
        if constexpr (!std::is_same_v<T, float>) {
          cuda::cast<float, T>(context_, in.c, dgamma, gradient_data(state.weight));
          cuda::cast<float, T>(context_, in.c, dbeta, gradient_data(state.bias));
        }
        if (on_gradient) {
          on_gradient(state.weight);
          on_gradient(state.bias);
        }
        finish_gradient(layer.input, accumulate);
        break;
      }
      case LayerKind::relu: {
        T* dx = gradient_target(layer.input, accumulate);
        cuda::relu_backward<T>(context_, in.size(), activation_[static_cast<size_t>(layer.output)], dy, dx);
        finish_gradient(layer.input, accumulate);
        break;
      }
      case LayerKind::max_pool: {
        T* dx = gradient_target(layer.input, accumulate);
        cuda::max_pool_backward<T>(context_,
                                   ops::Pool2dShape{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding},
                                   dy, state.argmax, dx);
        finish_gradient(layer.input, accumulate);
        break;
      }
      case LayerKind::residual_add:
        // y = a + b: both operands receive dy; where plan_fusion found it safe, by sharing its buffer.
        for (int operand : {layer.input, layer.input_b}) {
          const bool share = operand == layer.input ? state.share_gradient_a : state.share_gradient_b;
          if (share && !gradient_written_[static_cast<size_t>(operand)]) {
            gradient_of_[static_cast<size_t>(operand)] = gradient_of_[static_cast<size_t>(layer.output)];
            gradient_written_[static_cast<size_t>(operand)] = true;
            continue;
          }
          T* dx = gradient_target(operand, accumulate);
          TRAIN_CUDA_CHECK(cudaMemcpyAsync(dx, dy, sizeof(T) * static_cast<size_t>(in.size()),
                                           cudaMemcpyDeviceToDevice, stream));
          finish_gradient(operand, accumulate);
        }
        break;
      case LayerKind::global_avg_pool: {
        T* dx = gradient_target(layer.input, accumulate);
        cuda::global_avg_pool_backward<T>(context_, in.n, in.h * in.w, in.c, dy, dx);
        finish_gradient(layer.input, accumulate);
        break;
      }
      case LayerKind::fully_connected: {
        T* dx = gradient_target(layer.input, accumulate);
        cuda::fully_connected_backward<T>(context_, in.n, in.c, layer.out_channels, x, weight_data(state.weight), dy,
                                          dx, gradient_data(state.weight), gradient_data(state.bias));
        if (on_gradient) {
          on_gradient(state.bias);
          on_gradient(state.weight);
        }
        finish_gradient(layer.input, accumulate);
        break;
      }
    }
    if (between_layers) between_layers();
  }
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
void GpuResNet<T>::sgd_step(const ops::SgdOptions& options) {
  cuda::sgd_step<T>(context_, *sgd_table_, options);
}

template <typename T>
const float* GpuResNet<T>::trust_ratios() const {
  return sgd_table_->trust_ratios();
}

template <typename T>
ExportedTensors export_model_state(GpuResNet<T>& model) {
  ExportedTensors exported;
  const std::vector<float> values = model.download_parameters();
  std::map<int, int> parameter_of_spec;
  for (int p = 0; p < model.parameter_tensors(); ++p) {
    parameter_of_spec[model.parameters()[static_cast<size_t>(p)].spec_index] = p;
  }
  const auto& tensors = model.spec().tensors;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& tensor = tensors[i];
    const int index = static_cast<int>(i);
    if (tensor.role == TensorRole::bn_batches_tracked) {
      exported.add_int64(tensor.name, model.batches_tracked(index));
    } else if (tensor.is_parameter()) {
      const auto& parameter = model.parameters()[static_cast<size_t>(parameter_of_spec.at(index))];
      const auto begin = values.begin() + static_cast<std::ptrdiff_t>(parameter.offset);
      std::vector<float> copy(begin, begin + parameter.count);
      if (tensor.role == TensorRole::conv_weight) copy = convert_conv_layout(copy, tensor.shape, /*to_oihw=*/true);
      exported.add(tensor.name, tensor.shape, std::move(copy));
    } else {
      exported.add(tensor.name, tensor.shape, model.download_buffer(index));
    }
  }
  return exported;
}

template class GpuResNet<float>;
template class GpuResNet<cuda::bf16>;
template ExportedTensors export_model_state(GpuResNet<float>&);
template ExportedTensors export_model_state(GpuResNet<cuda::bf16>&);

}  // namespace train::gpu
