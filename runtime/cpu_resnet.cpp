#include "cpu_resnet.h"

#include "kernels/ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

namespace train {

namespace {

constexpr double bn_epsilon = 1e-5;
constexpr double bn_momentum = 0.1;
// The first bucket is small so that the first allreduce starts after the classifier's gradients.
constexpr size_t first_bucket_bytes = 1 << 20;

}  // namespace

template <typename T>
CpuResNet<T>::CpuResNet(ResNetSpec spec, int max_batch, int height, int width, size_t bucket_bytes)
    : spec_(std::move(spec)), max_batch_(max_batch), height_(height), width_(width) {
  if (max_batch < 2) throw std::invalid_argument("batch norm in training mode needs at least 2 images per rank");
  std::map<std::string, int> spec_index;
  std::vector<int> parameter_of_spec(spec_.tensors.size(), -1);
  std::vector<size_t> elements;
  size_t value_offset = 0;
  buffer_offset_.assign(spec_.tensors.size(), 0);
  size_t float_buffer_size = 0;
  for (size_t i = 0; i < spec_.tensors.size(); ++i) {
    const auto& tensor = spec_.tensors[i];
    spec_index[tensor.name] = static_cast<int>(i);
    if (tensor.is_parameter()) {
      parameter_of_spec[i] = static_cast<int>(parameters_.size());
      parameters_.push_back(Parameter{static_cast<int>(i), value_offset, 0, tensor.elements()});
      value_offset += static_cast<size_t>(tensor.elements());
      elements.push_back(static_cast<size_t>(tensor.elements()));
    } else if (tensor.role == TensorRole::bn_batches_tracked) {
      buffer_offset_[i] = tracked_buffers_.size();
      tracked_buffers_.push_back(0);
    } else {
      buffer_offset_[i] = float_buffer_size;
      float_buffer_size += static_cast<size_t>(tensor.elements());
    }
  }
  float_buffers_.assign(float_buffer_size, T(0));
  values_.assign(value_offset, T(0));
  plan_ = plan_buckets(elements, bucket_bytes, first_bucket_bytes);
  for (size_t p = 0; p < parameters_.size(); ++p) parameters_[p].gradient_offset = plan_.offset_of_tensor[p];
  gradients_.assign(plan_.total_elements, T(0));

  auto parameter = [&](const std::string& name) {
    auto it = spec_index.find(name);
    if (it == spec_index.end() || parameter_of_spec[static_cast<size_t>(it->second)] < 0) {
      throw std::logic_error("ResNet spec lacks parameter " + name);
    }
    return parameter_of_spec[static_cast<size_t>(it->second)];
  };
  auto buffer = [&](const std::string& name) { return spec_index.at(name); };

  max_shapes_.assign(static_cast<size_t>(spec_.activation_count), {});
  max_shapes_[0] = {max_batch, height, width, 3};
  layer_state_.resize(spec_.layers.size());
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
        state.running_mean = buffer(layer.name + ".running_mean");
        state.running_var = buffer(layer.name + ".running_var");
        state.tracked = buffer(layer.name + ".num_batches_tracked");
        state.save_mean.resize(static_cast<size_t>(in.c));
        state.save_invstd.resize(static_cast<size_t>(in.c));
        break;
      case LayerKind::max_pool: {
        ops::Pool2dShape pool{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding};
        out = {in.n, pool.out_h(), pool.out_w(), in.c};
        state.argmax.resize(static_cast<size_t>(out.size()));
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
      throw std::invalid_argument(fmt::format("input {}x{} is too small for {}: layer {} would have no output",
                                              height, width, fmt::format("resnet{}", spec_.depth), layer.name));
    }
    max_shapes_[static_cast<size_t>(layer.output)] = out;
  }
  activations_.resize(max_shapes_.size());
  activation_gradients_.resize(max_shapes_.size());
  size_t largest = 0;
  for (size_t a = 0; a < max_shapes_.size(); ++a) {
    activations_[a].resize(static_cast<size_t>(max_shapes_[a].size()));
    if (a > 0) activation_gradients_[a].resize(static_cast<size_t>(max_shapes_[a].size()));
    largest = std::max(largest, static_cast<size_t>(max_shapes_[a].size()));
  }
  scratch_.resize(largest);
  gradient_written_.assign(max_shapes_.size(), false);
  gradient_of_.assign(max_shapes_.size(), nullptr);
  shapes_ = max_shapes_;
  plan_fusion();
}

template <typename T>
void CpuResNet<T>::plan_fusion() {
  const std::vector<LayerFusion> plan = plan_layer_fusion(spec_);
  for (size_t l = 0; l < plan.size(); ++l) static_cast<LayerFusion&>(layer_state_[l]) = plan[l];
}

template <typename T>
T* CpuResNet<T>::buffer_data(int spec_index) {
  return float_buffers_.data() + buffer_offset_.at(static_cast<size_t>(spec_index));
}

template <typename T>
int64_t& CpuResNet<T>::batches_tracked(int spec_index) {
  return tracked_buffers_.at(buffer_offset_.at(static_cast<size_t>(spec_index)));
}

template <typename T>
void CpuResNet<T>::initialize(uint64_t seed) {
  std::mt19937_64 generator(seed);
  for (int p = 0; p < parameter_tensors(); ++p) {
    const auto& tensor = spec_.tensors[static_cast<size_t>(parameters_[static_cast<size_t>(p)].spec_index)];
    T* values = parameter_data(p);
    const int64_t count = parameters_[static_cast<size_t>(p)].count;
    switch (tensor.role) {
      case TensorRole::conv_weight: {
        // kaiming_normal_(mode="fan_out", nonlinearity="relu"): std = sqrt(2 / (out * kh * kw)).
        double fan_out = static_cast<double>(tensor.shape[0] * tensor.shape[2] * tensor.shape[3]);
        std::normal_distribution<float> normal(0.0f, static_cast<float>(std::sqrt(2.0 / fan_out)));
        for (int64_t i = 0; i < count; ++i) values[i] = static_cast<T>(normal(generator));
        break;
      }
      case TensorRole::bn_weight: std::fill(values, values + count, T(1)); break;
      case TensorRole::bn_bias: std::fill(values, values + count, T(0)); break;
      case TensorRole::fc_weight:
      case TensorRole::fc_bias: {
        // nn.Linear's default: kaiming_uniform_(a=sqrt(5)) and the bias alike: U(-1/sqrt(in), 1/sqrt(in)).
        const double fan_in = static_cast<double>(spec_.layers.back().in_channels);
        float bound = static_cast<float>(1.0 / std::sqrt(fan_in));
        std::uniform_real_distribution<float> uniform(-bound, bound);
        for (int64_t i = 0; i < count; ++i) values[i] = static_cast<T>(uniform(generator));
        break;
      }
      default: break;
    }
  }
  for (size_t i = 0; i < spec_.tensors.size(); ++i) {
    const auto& tensor = spec_.tensors[i];
    if (tensor.role == TensorRole::bn_running_mean) std::fill_n(buffer_data(static_cast<int>(i)), tensor.elements(), T(0));
    if (tensor.role == TensorRole::bn_running_var) std::fill_n(buffer_data(static_cast<int>(i)), tensor.elements(), T(1));
    if (tensor.role == TensorRole::bn_batches_tracked) batches_tracked(static_cast<int>(i)) = 0;
  }
}

template <typename T>
void CpuResNet<T>::set_batch(int batch) {
  if (batch < 1 || batch > max_batch_) {
    throw std::invalid_argument(fmt::format("batch of {} images; this model holds 1 to {}", batch, max_batch_));
  }
  for (size_t a = 0; a < shapes_.size(); ++a) shapes_[a].n = batch;
}

template <typename T>
void CpuResNet<T>::batch_norm_train(const LayerSpec& bn, LayerState& state, const T* shortcut, bool relu, T* y) {
  const ActivationShape& in = shapes_[static_cast<size_t>(bn.input)];
  const int64_t rows = int64_t{in.n} * in.h * in.w;
  const T* x = activations_[static_cast<size_t>(bn.input)].data();
  if (relu) {
    ops::batch_norm_relu_forward_train(rows, in.c, x, shortcut, parameter_data(state.weight),
                                       parameter_data(state.bias), T(bn_epsilon), T(bn_momentum),
                                       buffer_data(state.running_mean), buffer_data(state.running_var), y,
                                       state.save_mean.data(), state.save_invstd.data());
  } else {
    ops::batch_norm_forward_train(rows, in.c, x, parameter_data(state.weight), parameter_data(state.bias),
                                  T(bn_epsilon), T(bn_momentum), buffer_data(state.running_mean),
                                  buffer_data(state.running_var), y, state.save_mean.data(), state.save_invstd.data());
  }
  ++batches_tracked(state.tracked);
}

template <typename T>
void CpuResNet<T>::forward(const T* images, int batch, bool training) {
  set_batch(batch);
  std::copy(images, images + shapes_[0].size(), activations_[0].data());
  for (size_t l = 0; l < spec_.layers.size(); ++l) {
    const auto& layer = spec_.layers[l];
    auto& state = layer_state_[l];
    const ActivationShape& in = shapes_[static_cast<size_t>(layer.input)];
    const T* x = activations_[static_cast<size_t>(layer.input)].data();
    T* y = activations_[static_cast<size_t>(layer.output)].data();
    switch (layer.kind) {
      case LayerKind::conv:
        ops::conv2d_forward(ops::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel,
                                                     layer.stride, layer.padding),
                            x, parameter_data(state.weight), y);
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
          ops::batch_norm_forward_inference(rows, in.c, x, parameter_data(state.weight), parameter_data(state.bias),
                                            buffer_data(state.running_mean), buffer_data(state.running_var),
                                            T(bn_epsilon), y);
        }
        break;
      }
      case LayerKind::relu:
        if (!training || state.fusion == Fusion::none) ops::relu_forward(in.size(), x, y);
        break;
      case LayerKind::max_pool:
        ops::max_pool_forward(ops::Pool2dShape{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding}, x,
                              y, state.argmax.data());
        break;
      case LayerKind::residual_add:
        if (training && state.fusion == Fusion::bn_add_relu) {
          const auto bn = static_cast<size_t>(state.partner);
          batch_norm_train(spec_.layers[bn], layer_state_[bn], activations_[static_cast<size_t>(layer.input_b)].data(),
                           true, relu_output(state));
        } else {
          ops::add(in.size(), x, activations_[static_cast<size_t>(layer.input_b)].data(), y);
        }
        break;
      case LayerKind::global_avg_pool: ops::global_avg_pool_forward(in.n, in.h * in.w, in.c, x, y); break;
      case LayerKind::fully_connected:
        ops::fully_connected_forward(in.n, in.c, layer.out_channels, x, parameter_data(state.weight),
                                     parameter_data(state.bias), y);
        break;
    }
  }
}

template <typename T>
void CpuResNet<T>::infer(const T* images, int batch, T* logits) {
  forward(images, batch, /*training=*/false);
  const auto& out = activations_.back();
  std::copy(out.begin(), out.begin() + int64_t{batch} * spec_.num_classes, logits);
}

template <typename T>
T* CpuResNet<T>::gradient_target(int activation, bool& accumulate) {
  accumulate = gradient_written_[static_cast<size_t>(activation)];
  return accumulate ? scratch_.data() : gradient_of_[static_cast<size_t>(activation)];
}

template <typename T>
void CpuResNet<T>::finish_gradient(int activation, bool accumulate) {
  T* target = gradient_of_[static_cast<size_t>(activation)];
  if (accumulate) ops::add(shapes_[static_cast<size_t>(activation)].size(), target, scratch_.data(), target);
  gradient_written_[static_cast<size_t>(activation)] = true;
}

template <typename T>
typename CpuResNet<T>::StepResult CpuResNet<T>::train_step(const T* images, const int32_t* labels, int batch,
                                                                  T label_smoothing, T gradient_scale,
                                            const std::function<void(int)>& on_gradient,
                                            const std::function<void()>& between_layers) {
  forward(images, batch, /*training=*/true);
  StepResult result;
  const int classes = spec_.num_classes;
  const size_t last = activations_.size() - 1;
  const T* logits = activations_[last].data();
  for (int i = 0; i < batch; ++i) {
    const T* row = logits + int64_t{i} * classes;
    result.correct += (std::max_element(row, row + classes) - row) == labels[i] ? 1 : 0;
  }
  for (size_t a = 0; a < gradient_of_.size(); ++a) gradient_of_[a] = activation_gradients_[a].data();
  T* dlogits = gradient_of_[last];
  result.loss = ops::softmax_cross_entropy(batch, classes, logits, labels, label_smoothing, dlogits);
  for (int64_t i = 0; i < int64_t{batch} * classes; ++i) dlogits[i] *= gradient_scale;
  std::fill(gradient_written_.begin(), gradient_written_.end(), false);
  gradient_written_[last] = true;

  for (size_t l = spec_.layers.size(); l-- > 0;) {
    const auto& layer = spec_.layers[l];
    auto& state = layer_state_[l];
    if (state.fusion == Fusion::relu_in_bn) continue;  // its batch norm does its backward
    const auto input = static_cast<size_t>(layer.input);
    const ActivationShape& in = shapes_[input];
    const T* x = activations_[input].data();
    // A batch norm fused with its ReLU takes the gradient at the ReLU's output.
    const int output = state.fusion == Fusion::bn_relu
                           ? spec_.layers[static_cast<size_t>(state.relu_layer)].output
                           : layer.output;
    const T* dy = gradient_of_[static_cast<size_t>(output)];
    if (!gradient_written_[static_cast<size_t>(output)]) {
      throw std::logic_error("no gradient reached the output of " + layer.name);
    }
    bool accumulate = false;
    switch (layer.kind) {
      case LayerKind::conv: {
        auto shape = ops::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel, layer.stride,
                                              layer.padding);
        ops::conv2d_backward_weight(shape, x, dy, gradient_data(state.weight));
        on_gradient(state.weight);
        if (layer.input != 0) {  // the image needs no gradient
          T* dx = gradient_target(layer.input, accumulate);
          ops::conv2d_backward_input(shape, dy, parameter_data(state.weight), dx);
          finish_gradient(layer.input, accumulate);
        }
        break;
      }
      case LayerKind::batch_norm: {
        T* dx = gradient_target(layer.input, accumulate);
        const int64_t rows = int64_t{in.n} * in.h * in.w;
        if (state.fusion == Fusion::bn_relu) {
          ops::batch_norm_relu_backward(rows, in.c, x, relu_output(state), dy, parameter_data(state.weight),
                                        state.save_mean.data(), state.save_invstd.data(), dx,
                                        gradient_data(state.weight), gradient_data(state.bias));
        } else {
          ops::batch_norm_backward(rows, in.c, x, dy, parameter_data(state.weight), state.save_mean.data(),
                                   state.save_invstd.data(), dx, gradient_data(state.weight),
                                   gradient_data(state.bias));
        }
        on_gradient(state.weight);
        on_gradient(state.bias);
        finish_gradient(layer.input, accumulate);
        break;
      }
      case LayerKind::relu: {
        T* dx = gradient_target(layer.input, accumulate);
        ops::relu_backward(in.size(), activations_[static_cast<size_t>(layer.output)].data(), dy, dx);
        finish_gradient(layer.input, accumulate);
        break;
      }
      case LayerKind::max_pool: {
        T* dx = gradient_target(layer.input, accumulate);
        ops::max_pool_backward(ops::Pool2dShape{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding}, dy,
                               state.argmax.data(), dx);
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
          std::copy(dy, dy + in.size(), dx);
          finish_gradient(operand, accumulate);
        }
        break;
      case LayerKind::global_avg_pool: {
        T* dx = gradient_target(layer.input, accumulate);
        ops::global_avg_pool_backward(in.n, in.h * in.w, in.c, dy, dx);
        finish_gradient(layer.input, accumulate);
        break;
      }
      case LayerKind::fully_connected: {
        T* dx = gradient_target(layer.input, accumulate);
        ops::fully_connected_backward(in.n, in.c, layer.out_channels, x, parameter_data(state.weight), dy, dx,
                                      gradient_data(state.weight), gradient_data(state.bias));
        on_gradient(state.bias);
        on_gradient(state.weight);
        finish_gradient(layer.input, accumulate);
        break;
      }
    }
    between_layers();
  }
  return result;
}

template class CpuResNet<float>;
template class CpuResNet<double>;

}  // namespace train
