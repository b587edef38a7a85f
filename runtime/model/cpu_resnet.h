// ResNet on the CPU in T (float for training; double to check the model against PyTorch's float64 without
// the noise of fp32 rounding flipping a ReLU or a max-pool winner): the storage of a ResNetPlan and the
// kernels of kernels/ops.h; the layer walk is ResNetPasses'. It owns the parameters (conv weights in
// OHWI), the optimizer's momentum, the BN buffers and the activations of one batch, as its twin GpuResNet
// does on the device; its gradients are views into the flat buffer of the communication layer (the
// reducer's, runtime/comm/gradient_buckets.h), laid out by its bucket plan. Backward reports every parameter
// gradient the moment it is written, so the gradient buckets can start reducing while backward goes on.
#pragma once

#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/model_state.h"
#include "runtime/model/resnet_passes.h"
#include "runtime/model/resnet_plan.h"

#include "kernels/ops.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace train::model {

template <typename T>
class CpuResNet : public ResNetPasses<CpuResNet<T>, T> {
  using Passes = ResNetPasses<CpuResNet<T>, T>;
  friend Passes;

 public:
  // Activations are sized for plan.max_batch images; the gradients are written into `gradients` (which
  // must outlive the model).
  CpuResNet(ResNetPlan plan, comm::GradientViews<T> gradients);

  // torchvision's default initialisation (initialize_resnet); momentum zero.
  void initialize(uint64_t seed);

  struct StepResult {
    double loss = 0;     // mean cross-entropy over this rank's batch
    int correct = 0;     // top-1 hits in the batch (training-mode logits)
  };
  // A training step's first half: forward in training mode, the loss and its gradient, which
  // `gradient_scale` multiplies (1/ranks: the reduction's sum then is the average). backward() (ResNetPasses)
  // is the second half; the optimizer (sgd_step) comes after the reduction.
  StepResult forward_and_loss(const T* images, const int32_t* labels, int batch, T label_smoothing,
                              T gradient_scale);

  // Forward in inference mode (running statistics) into logits [batch][classes].
  void infer(const T* images, int batch, T* logits);

  // One optimizer step over every parameter (kernels::sgd_step) with the gradients as they are now (after the
  // reduction): weight decay where TensorSpec::decays() (conv and fc weights), momentum kept here.
  void sgd_step(const kernels::SgdOptions& options);

  // Parameter p (forward numbering): values (conv weights OHWI) and gradient.
  T* parameter_data(int p) { return values_.data() + this->plan_.parameters[static_cast<size_t>(p)].offset; }
  T* gradient_data(int p) { return gradients_ + this->gradient_offset(p); }
  std::vector<T>& all_values() { return values_; }
  std::vector<T>& all_momentum() { return momentum_; }  // laid out as the parameters
  std::vector<T>& all_buffers() { return float_buffers_; }  // laid out by plan().buffer_offset
  // BN running_mean / running_var by spec index.
  T* buffer_data(int spec_index) { return float_buffers_.data() + this->plan_.buffer_offset.at(static_cast<size_t>(spec_index)); }

  // The input each output element of max-pool layer `layer` took in the last training pass (h * W + w, as
  // torch's indices), laid out as its output.
  const int32_t* max_pool_winners(size_t layer) const { return saved_.at(layer).argmax; }

  // The whole model state (parameters, BN buffers and counters) in torchvision's names and shapes, and back.
  ExportedTensors export_state() const;
  void import_state(const std::vector<model_io::Tensor>& tensors);  // tensors it lacks keep their values

 private:
  // The op calls of ResNetPasses (its header lists them): kernels/ops.h on this model's storage.
  const T* take_input(const T* images, int64_t elements) {
    std::copy(images, images + elements, input_);
    return input_;
  }
  void conv_forward(const LayerPlan& l, const kernels::Conv2dShape& s, const T* x, T* y) {
    kernels::conv2d_forward(s, x, parameter_data(l.weight), y);
  }
  void conv_backward_weight(const LayerPlan& l, const kernels::Conv2dShape& s, const T* x, const T* dy) {
    kernels::conv2d_backward_weight(s, x, dy, gradient_data(l.weight));
  }
  void conv_backward_input(const LayerPlan& l, const kernels::Conv2dShape& s, const T* dy, T* dx) {
    kernels::conv2d_backward_input(s, dy, parameter_data(l.weight), dx);
  }
  void bn_forward_train(size_t l, int64_t rows, int channels, const T* x, const T* shortcut, bool relu, T* y);
  void bn_forward_inference(const LayerPlan& l, int64_t rows, int channels, const T* x, T* y) {
    kernels::batch_norm_forward_inference(rows, channels, x, parameter_data(l.weight), parameter_data(l.bias),
                                          buffer_data(l.running_mean), buffer_data(l.running_var), T(bn_epsilon), y);
  }
  void bn_backward(size_t l, int64_t rows, int channels, const T* x, const T* relu_y, const T* dy, T* dx);
  void relu_forward(int64_t n, const T* x, T* y) { kernels::relu_forward(n, x, y); }
  void relu_backward(int64_t n, const T* y, const T* dy, T* dx) { kernels::relu_backward(n, y, dy, dx); }
  void add(int64_t n, const T* a, const T* b, T* y) { kernels::add(n, a, b, y); }
  void copy(int64_t n, const T* x, T* y) { std::copy(x, x + n, y); }
  void max_pool_forward(size_t l, const kernels::Pool2dShape& s, const T* x, T* y) {
    kernels::max_pool_forward(s, x, y, saved_[l].argmax);
  }
  void max_pool_backward(size_t l, const kernels::Pool2dShape& s, const T* dy, T* dx) {
    kernels::max_pool_backward(s, dy, saved_[l].argmax, dx);
  }
  void avg_pool_forward(int n, int hw, int c, const T* x, T* y) { kernels::global_avg_pool_forward(n, hw, c, x, y); }
  void avg_pool_backward(int n, int hw, int c, const T* dy, T* dx) {
    kernels::global_avg_pool_backward(n, hw, c, dy, dx);
  }
  void fc_forward(const LayerPlan& l, int n, int in, int out, const T* x, T* y) {
    kernels::fully_connected_forward(n, in, out, x, parameter_data(l.weight), parameter_data(l.bias), y);
  }
  void fc_backward(const LayerPlan& l, int n, int in, int out, const T* x, const T* dy, T* dx) {
    kernels::fully_connected_backward(n, in, out, x, parameter_data(l.weight), dy, dx, gradient_data(l.weight),
                                      gradient_data(l.bias));
  }

  // The passes' storage (ResNetPasses::allocate_storage): zeroed, kept as long as the model.
  template <typename U>
  U* allocate(size_t elements) {
    storage_.push_back(std::make_unique<std::byte[]>(sizeof(U) * elements));
    return reinterpret_cast<U*>(storage_.back().get());
  }

  std::vector<T> values_, momentum_, float_buffers_;
  T* gradients_ = nullptr;  // the communication layer's flat buffer
  std::vector<std::unique_ptr<std::byte[]>> storage_;
  std::vector<typename Passes::template SavedForBackward<T>> saved_;  // by layer
  T* input_ = nullptr;  // the images, copied in (activation 0)
};

extern template class CpuResNet<float>;
extern template class CpuResNet<double>;

}  // namespace train::model
