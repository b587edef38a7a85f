// The forward and backward passes of a ResNet, written once for both models. ResNetPasses walks the
// layers of a ResNetPlan (fusions, which gradient goes where, when a parameter's gradient is final); the
// model deriving from it (CpuResNet, GpuResNet) owns the storage and answers the op calls below with its
// backend's kernels, as Caffe's layers have CPU and GPU twins behind one interface.
//
// What the Model must provide (called with this step's shapes; every pointer is the model's storage):
//   U* allocate<U>(elements)                                    storage, for allocate_storage (below)
//   const T* take_input(const T* images, int64_t elements)      the images as activation 0
//   conv_forward(layer, shape, x, y), conv_backward_weight(layer, shape, x, dy) (into layer.weight's
//   gradient), conv_backward_input(layer, shape, dy, dx)
//   bn_forward_train(l, rows, channels, x, shortcut, relu, y)   batch statistics, running statistics, saved
//   statistics of layer index l; shortcut (may be null) is added before the ReLU
//   bn_forward_inference(layer, rows, channels, x, y)
//   bn_backward(l, rows, channels, x, relu_y, dy, dx)          into the BN's weight and bias gradients;
//   relu_y is the output of the fused ReLU (null when none)
//   relu_forward(n, x, y), relu_backward(n, y, dy, dx), add(n, a, b, y), copy(n, x, y)
//   max_pool_forward(l, shape, x, y), max_pool_backward(l, shape, dy, dx)
//   avg_pool_forward(n, hw, c, x, y), avg_pool_backward(n, hw, c, dy, dx)
//   fc_forward(layer, n, in, out, x, y), fc_backward(layer, n, in, out, x, dy, dx)  (fc_backward writes
//   the weight and bias gradients)
// In-place calls happen: inference writes a fused BN's output into the storage of the ReLU it is fused
// with, then runs add and ReLU with y == x.
#pragma once

#include "kernels/ops.h"
#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/resnet_plan.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace train::model {

// The timeline's marks in a training step (runtime/timeline/): mark(pass, group) as the pass enters each
// layer group (spec's layer_group_name, forward order for forward, reverse for backward) and
// mark(pass, -1) when the pass ends. On the CPU the mark reads the clock; on the GPU it is called as the
// group's first kernel is about to be enqueued, and records a device timestamp on the compute stream.
enum class Pass { forward, backward };
using PassMarks = std::function<void(Pass pass, int group)>;

template <typename Model, typename T>
class ResNetPasses {
 public:
  // Marks for the training passes from now on; empty (the default) marks nothing.
  void set_pass_marks(PassMarks marks) { pass_marks_ = std::move(marks); }
  const ResNetPlan& plan() const { return plan_; }
  const ResNetSpec& spec() const { return plan_.spec; }
  int parameter_tensors() const { return plan_.parameter_tensors(); }
  int max_batch() const { return plan_.max_batch; }
  // Parameter p (forward numbering): its place in the parameter store and in the gradient buffer.
  struct Parameter {
    int spec_index = 0;          // into spec().tensors
    size_t offset = 0;           // into the parameter (and momentum) store
    size_t gradient_offset = 0;  // into the flat gradient buffer (the bucket plan's layout)
    int64_t count = 0;
  };
  const std::vector<Parameter>& parameters() const { return parameters_; }
  // Activation `index` of the last pass (spec's numbering; the shape is this step's), where the model keeps
  // it (host or device memory). A ReLU's output is what tests/model reads to learn which way the ReLU decided.
  const T* activation(int index) const { return activation_.at(static_cast<size_t>(index)); }
  const ActivationShape& activation_shape(int index) const { return shapes_.at(static_cast<size_t>(index)); }
  // num_batches_tracked of a BN, by its spec index (a host counter on both backends).
  int64_t& batches_tracked(int spec_index) { return tracked_.at(plan_.buffer_offset.at(static_cast<size_t>(spec_index))); }
  std::vector<int64_t>& all_tracked() { return tracked_; }  // laid out by plan().buffer_offset
  const std::vector<int64_t>& all_tracked() const { return tracked_; }

  // A training step's second half, after the model's forward_and_loss: the layers in reverse from the loss's
  // gradient. `on_gradient(p)` once per parameter p (forward numbering) right after the op that finishes
  // p's gradient (so that its bucket can start reducing); `between_layers()` after each backward layer.
  // Either may be empty.
  void backward(const std::function<void(int)>& on_gradient, const std::function<void()>& between_layers);

 protected:
  // `gradients` lays out the flat gradient buffer (the bucket plan that the communication layer made from
  // plan.parameter_counts()): each parameter's gradient offset is taken from it here.
  ResNetPasses(ResNetPlan plan, const comm::BucketPlan& gradients)
      : plan_(std::move(plan)), shapes_(plan_.max_shapes), tracked_(plan_.tracked_buffers, 0) {
    if (gradients.offset_of_tensor.size() != plan_.parameters.size()) {
      throw std::invalid_argument("the gradient buckets were planned for another network");
    }
    for (size_t p = 0; p < plan_.parameters.size(); ++p) {
      const auto& slot = plan_.parameters[p];
      parameters_.push_back(Parameter{slot.spec_index, slot.offset, gradients.offset_of_tensor[p], slot.count});
    }
  }

  // What training saves for backward in a layer: a batch norm's batch statistics (S: the model's type for
  // them), a max pool's argmax.
  template <typename S>
  struct SavedForBackward {
    S* mean = nullptr;
    S* invstd = nullptr;
    std::int32_t* argmax = nullptr;
  };

  // Takes the passes' storage from the model, for plan.max_batch images, and binds it: every activation
  // with storage of its own (plan.storage_of: a fused-away output lives in the storage of the ReLU output
  // it is fused into), every gradient buffer of the plan, the scratch of the largest activation, and per
  // layer what training saves for backward (returned). The images (activation 0) are the model's own
  // business: take_input gives them. The model answers `allocate<U>(elements)` with memory for `elements`
  // values of U that lives as long as it does (nothing here reads what it has not written).
  template <typename S>
  std::vector<SavedForBackward<S>> allocate_storage();

  // The optimizer's table, built from the plan for both models (kernels::SgdTensor<T> on the CPU,
  // kernels::cuda::SgdTensor<T> on the GPU): every parameter in forward order, its values and momentum at its
  // offset in the parameter store, its gradient at its offset in the gradient buffer (the bucket layout),
  // its count, and whether it takes weight decay (TensorSpec::decays: conv and fc weights).
  template <typename Tensor, typename V, typename G>
  std::vector<Tensor> optimizer_tensors(V* values, const G* gradients, V* momentum) const;

  size_t gradient_offset(int p) const { return parameters_[static_cast<size_t>(p)].gradient_offset; }
  const T* logits() const { return activation_.back(); }
  // Every convolution's shape at the largest batch (what a model reserves workspace for).
  std::vector<kernels::Conv2dShape> conv_shapes_at_max_batch() const {
    std::vector<kernels::Conv2dShape> shapes;
    for (const auto& layer : plan_.spec.layers) {
      if (layer.kind == LayerKind::conv) shapes.push_back(conv_shape(layer, plan_.max_shapes[static_cast<size_t>(layer.input)]));
    }
    return shapes;
  }

  void forward(const T* images, int batch, bool training);
  // Where the loss's gradient (the logits' gradient) goes, for backward() to start from.
  T* begin_backward();

  ResNetPlan plan_;
  std::vector<Parameter> parameters_;
  std::vector<ActivationShape> shapes_;  // this step's
  std::vector<int64_t> tracked_;

 private:
  Model& model() { return static_cast<Model&>(*this); }
  static kernels::Conv2dShape conv_shape(const LayerSpec& layer, const ActivationShape& in) {
    return kernels::Conv2dShape::square(in.n, in.h, in.w, in.c, layer.out_channels, layer.kernel, layer.stride,
                                        layer.padding);
  }
  void set_batch(int batch);
  T* relu_output(const LayerPlan& fused) {
    return activation_[static_cast<size_t>(plan_.spec.layers[static_cast<size_t>(fused.relu_layer)].output)];
  }
  void batch_norm_train(size_t l, const T* shortcut, bool relu, T* y);
  // Runs `compute(dx)` for a gradient of `elements` values going to `target`: written straight into its
  // buffer, or into scratch and then added (when another reader of the activation wrote its gradient first).
  template <typename Compute>
  void write_or_add_gradient(const GradientTarget& target, int64_t elements, Compute&& compute);

  // Calls the marks when `layer` starts another group than `*group` (and updates it).
  void mark_group(Pass pass, size_t layer, int* group) {
    const int next = plan_.spec.layers[layer].group;
    if (next == *group) return;
    *group = next;
    pass_marks_(pass, next);
  }

  std::vector<T*> activation_, gradient_buffer_;
  T* scratch_ = nullptr;
  PassMarks pass_marks_;
};

template <typename Model, typename T>
template <typename S>
std::vector<typename ResNetPasses<Model, T>::template SavedForBackward<S>> ResNetPasses<Model, T>::allocate_storage() {
  std::vector<SavedForBackward<S>> saved(plan_.layers.size());
  for (size_t l = 0; l < plan_.layers.size(); ++l) {
    const auto& layer = plan_.spec.layers[l];
    if (layer.kind == LayerKind::batch_norm) {
      const auto channels = static_cast<size_t>(plan_.max_shapes[static_cast<size_t>(layer.input)].c);
      S* statistics = model().template allocate<S>(2 * channels);
      saved[l].mean = statistics;
      saved[l].invstd = statistics + channels;
    } else if (layer.kind == LayerKind::max_pool) {
      const auto elements = static_cast<size_t>(plan_.max_shapes[static_cast<size_t>(layer.output)].size());
      saved[l].argmax = model().template allocate<std::int32_t>(elements);
    }
  }
  const size_t activations = plan_.max_shapes.size();
  activation_.assign(activations, nullptr);
  for (size_t a = 1; a < activations; ++a) {
    if (plan_.storage_of[a] == static_cast<int>(a)) {
      activation_[a] = model().template allocate<T>(static_cast<size_t>(plan_.max_shapes[a].size()));
    }
  }
  for (size_t a = 1; a < activations; ++a) activation_[a] = activation_[static_cast<size_t>(plan_.storage_of[a])];
  gradient_buffer_.clear();
  for (int64_t elements : plan_.gradient_buffers) {
    gradient_buffer_.push_back(model().template allocate<T>(static_cast<size_t>(elements)));
  }
  scratch_ = model().template allocate<T>(static_cast<size_t>(plan_.largest_activation));
  return saved;
}

template <typename Model, typename T>
template <typename Tensor, typename V, typename G>
std::vector<Tensor> ResNetPasses<Model, T>::optimizer_tensors(V* values, const G* gradients, V* momentum) const {
  std::vector<Tensor> tensors;
  tensors.reserve(parameters_.size());
  for (const Parameter& parameter : parameters_) {
    Tensor tensor;
    tensor.param = values + parameter.offset;
    tensor.grad = gradients + parameter.gradient_offset;
    tensor.momentum_buffer = momentum + parameter.offset;
    tensor.count = parameter.count;
    tensor.weight_decay = plan_.spec.tensors[static_cast<size_t>(parameter.spec_index)].decays();
    tensors.push_back(tensor);
  }
  return tensors;
}

template <typename Model, typename T>
void ResNetPasses<Model, T>::set_batch(int batch) {
  if (batch < 1 || batch > plan_.max_batch) {
    throw std::invalid_argument("batch of " + std::to_string(batch) + " images; this model holds 1 to " +
                                std::to_string(plan_.max_batch));
  }
  for (auto& shape : shapes_) shape.n = batch;
}

template <typename Model, typename T>
void ResNetPasses<Model, T>::batch_norm_train(size_t l, const T* shortcut, bool relu, T* y) {
  const LayerSpec& bn = plan_.spec.layers[l];
  const ActivationShape& in = shapes_[static_cast<size_t>(bn.input)];
  model().bn_forward_train(l, int64_t{in.n} * in.h * in.w, in.c, activation_[static_cast<size_t>(bn.input)], shortcut,
                           relu, y);
  ++batches_tracked(plan_.layers[l].tracked);
}

template <typename Model, typename T>
void ResNetPasses<Model, T>::forward(const T* images, int batch, bool training) {
  set_batch(batch);
  const bool marks = training && pass_marks_;
  int group = -1;
  if (marks) mark_group(Pass::forward, 0, &group);  // the input's copy belongs to the stem
  activation_[0] = const_cast<T*>(model().take_input(images, shapes_[0].size()));
  for (size_t l = 0; l < plan_.spec.layers.size(); ++l) {
    if (marks) mark_group(Pass::forward, l, &group);
    const auto& layer = plan_.spec.layers[l];
    const auto& entry = plan_.layers[l];
    const ActivationShape& in = shapes_[static_cast<size_t>(layer.input)];
    const T* x = activation_[static_cast<size_t>(layer.input)];
    T* y = activation_[static_cast<size_t>(layer.output)];
    switch (layer.kind) {
      case LayerKind::conv:
        model().conv_forward(entry, conv_shape(layer, in), x, y);
        break;
      case LayerKind::batch_norm:
        if (!training) {
          model().bn_forward_inference(entry, int64_t{in.n} * in.h * in.w, in.c, x, y);
        } else if (entry.fusion == Fusion::bn_relu) {
          batch_norm_train(l, nullptr, true, relu_output(entry));
        } else if (entry.fusion != Fusion::bn_in_add) {  // a BN fused into its add runs there
          batch_norm_train(l, nullptr, false, y);
        }
        break;
      case LayerKind::relu:
        if (!training || entry.fusion == Fusion::none) model().relu_forward(in.size(), x, y);
        break;
      case LayerKind::max_pool:
        model().max_pool_forward(
            l, kernels::Pool2dShape{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding}, x, y);
        break;
      case LayerKind::residual_add:
        if (training && entry.fusion == Fusion::bn_add_relu) {
          batch_norm_train(static_cast<size_t>(entry.partner), activation_[static_cast<size_t>(layer.input_b)], true,
                           relu_output(entry));
        } else {
          model().add(in.size(), x, activation_[static_cast<size_t>(layer.input_b)], y);
        }
        break;
      case LayerKind::global_avg_pool: model().avg_pool_forward(in.n, in.h * in.w, in.c, x, y); break;
      case LayerKind::fully_connected: model().fc_forward(entry, in.n, in.c, layer.out_channels, x, y); break;
    }
  }
  if (marks) pass_marks_(Pass::forward, -1);
}

template <typename Model, typename T>
T* ResNetPasses<Model, T>::begin_backward() {
  return gradient_buffer_[static_cast<size_t>(plan_.loss_gradient)];
}

template <typename Model, typename T>
template <typename Compute>
void ResNetPasses<Model, T>::write_or_add_gradient(const GradientTarget& target, int64_t elements, Compute&& compute) {
  T* buffer = gradient_buffer_[static_cast<size_t>(target.buffer)];
  compute(target.accumulate ? scratch_ : buffer);
  if (target.accumulate) model().add(elements, buffer, scratch_, buffer);
}

// The layers in reverse, each reading and writing the gradient buffers its route names (the plan walked
// the backward pass once to decide them: resnet_plan.cpp, route_backward).
template <typename Model, typename T>
void ResNetPasses<Model, T>::backward(const std::function<void(int)>& on_gradient,
                                      const std::function<void()>& between_layers) {
  auto gradient_done = [&](int p) {
    if (on_gradient) on_gradient(p);
  };
  const bool marks = static_cast<bool>(pass_marks_);
  int group = -1;
  for (size_t l = plan_.spec.layers.size(); l-- > 0;) {
    if (marks) mark_group(Pass::backward, l, &group);
    const auto& layer = plan_.spec.layers[l];
    const auto& entry = plan_.layers[l];
    const auto& route = plan_.backward[l];
    if (route.skip) continue;  // a ReLU its batch norm differentiates
    const ActivationShape& in = shapes_[static_cast<size_t>(layer.input)];
    const T* x = activation_[static_cast<size_t>(layer.input)];
    const T* dy = gradient_buffer_[static_cast<size_t>(route.dy)];
    switch (layer.kind) {
      case LayerKind::conv: {
        const auto shape = conv_shape(layer, in);
        model().conv_backward_weight(entry, shape, x, dy);
        gradient_done(entry.weight);
        if (route.dx.buffer >= 0) {  // the images need none
          write_or_add_gradient(route.dx, in.size(), [&](T* dx) { model().conv_backward_input(entry, shape, dy, dx); });
        }
        break;
      }
      case LayerKind::batch_norm:
        // Its parameters' gradients are final before any add into dx: reported first, so their buckets start.
        write_or_add_gradient(route.dx, in.size(), [&](T* dx) {
          model().bn_backward(l, int64_t{in.n} * in.h * in.w, in.c, x,
                              entry.fusion == Fusion::bn_relu ? relu_output(entry) : nullptr, dy, dx);
          gradient_done(entry.weight);
          gradient_done(entry.bias);
        });
        break;
      case LayerKind::relu:
        write_or_add_gradient(route.dx, in.size(), [&](T* dx) {
          model().relu_backward(in.size(), activation_[static_cast<size_t>(layer.output)], dy, dx);
        });
        break;
      case LayerKind::max_pool:
        write_or_add_gradient(route.dx, in.size(), [&](T* dx) {
          model().max_pool_backward(
              l, kernels::Pool2dShape{in.n, in.h, in.w, in.c, layer.kernel, layer.stride, layer.padding}, dy, dx);
        });
        break;
      case LayerKind::residual_add:
        // y = a + b: both operands receive dy; an operand that takes dy's buffer needs no copy.
        if (!route.a_takes_dy) {
          write_or_add_gradient(route.dx, in.size(), [&](T* dx) { model().copy(in.size(), dy, dx); });
        }
        if (!route.b_takes_dy) {
          write_or_add_gradient(route.dx_b, in.size(), [&](T* dx) { model().copy(in.size(), dy, dx); });
        }
        break;
      case LayerKind::global_avg_pool:
        write_or_add_gradient(route.dx, in.size(),
                              [&](T* dx) { model().avg_pool_backward(in.n, in.h * in.w, in.c, dy, dx); });
        break;
      case LayerKind::fully_connected:
        write_or_add_gradient(route.dx, in.size(), [&](T* dx) {
          model().fc_backward(entry, in.n, in.c, layer.out_channels, x, dy, dx);
          gradient_done(entry.bias);
          gradient_done(entry.weight);
        });
        break;
    }
    if (between_layers) between_layers();
  }
  if (marks) pass_marks_(Pass::backward, -1);
}

}  // namespace train::model
