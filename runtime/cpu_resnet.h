// ResNet on the CPU in T (float for training; double to check the model against PyTorch's float64
// without the noise of fp32 rounding flipping a ReLU or a max-pool winner), executing a ResNetSpec with the kernels of kernels/ops.h. It owns the
// parameters (conv weights in OHWI), the flat gradient buffer laid out by the bucket plan, the BN buffers
// and the activations of one batch. Backward reports every parameter gradient the moment it is written,
// so the gradient buckets can start reducing while backward goes on.
#pragma once

#include "gradient_buckets.h"
#include "layer_fusion.h"
#include "resnet_spec.h"

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace train {

template <typename T>
class CpuResNet {
 public:
  // Activations are sized for `max_batch` images of `height` x `width`.
  CpuResNet(ResNetSpec spec, int max_batch, int height, int width, size_t bucket_bytes);

  // torchvision's default initialisation: convolutions Kaiming-normal (fan_out, ReLU gain), BN weight 1
  // and bias 0, the classifier uniform in +-1/sqrt(fan_in) (weight and bias), running statistics 0 and 1.
  void initialize(uint64_t seed);

  struct StepResult {
    double loss = 0;     // mean cross-entropy over this rank's batch
    int correct = 0;     // top-1 hits in the batch (training-mode logits)
  };
  // Forward in training mode, loss, backward. `gradient_scale` multiplies the loss gradient (1/ranks: the
  // reduction's sum then is the average). `on_gradient(p)` is called once per parameter p (forward
  // numbering) as soon as its gradient is final; `between_layers()` after each backward layer.
  StepResult train_step(const T* images, const int32_t* labels, int batch, T label_smoothing, T gradient_scale, const std::function<void(int)>& on_gradient,
                        const std::function<void()>& between_layers);

  // Forward in inference mode (running statistics) into logits [batch][classes].
  void infer(const T* images, int batch, T* logits);

  const ResNetSpec& spec() const { return spec_; }
  const BucketPlan& bucket_plan() const { return plan_; }
  int parameter_tensors() const { return static_cast<int>(parameters_.size()); }

  // Parameter p (forward numbering): its spec, values (conv weights in OHWI) and gradient.
  struct Parameter {
    int spec_index = 0;  // into spec().tensors
    size_t offset = 0;   // into the parameter (and momentum) storage
    size_t gradient_offset = 0;
    int64_t count = 0;
  };
  const std::vector<Parameter>& parameters() const { return parameters_; }
  T* parameter_data(int p) { return values_.data() + parameters_[static_cast<size_t>(p)].offset; }
  const T* parameter_data(int p) const { return values_.data() + parameters_[static_cast<size_t>(p)].offset; }
  T* gradient_data(int p) { return gradients_.data() + parameters_[static_cast<size_t>(p)].gradient_offset; }
  std::vector<T>& all_values() { return values_; }
  std::vector<T>& all_gradients() { return gradients_; }

  // BN buffers by spec index: running_mean / running_var as floats, num_batches_tracked as int64.
  T* buffer_data(int spec_index);
  int64_t& batches_tracked(int spec_index);

 private:
  struct ActivationShape {
    int n = 0, h = 0, w = 0, c = 0;
    int64_t size() const { return int64_t{n} * h * w * c; }
  };
  // How a layer runs in training, once fused with its neighbours: layer_fusion.h.
  struct LayerState : LayerFusion {             // the fusion plan's entry, and:
    int weight = -1, bias = -1;                  // parameter indices (conv/bn/fc)
    int running_mean = -1, running_var = -1, tracked = -1;  // spec indices of BN buffers
    std::vector<T> save_mean, save_invstd;       // BN
    std::vector<int32_t> argmax;                 // max pool
  };
  void plan_fusion();
  void forward(const T* images, int batch, bool training);
  void batch_norm_train(const LayerSpec& bn, LayerState& state, const T* shortcut, bool relu, T* y);
  T* relu_output(const LayerState& fused) {
    return activations_[static_cast<size_t>(spec_.layers[static_cast<size_t>(fused.relu_layer)].output)].data();
  }
  void set_batch(int batch);
  // Where layer output gradients go: straight into the activation's gradient when nothing wrote it yet
  // this step, else into scratch followed by an add (two consumers of one activation).
  T* gradient_target(int activation, bool& accumulate);
  void finish_gradient(int activation, bool accumulate);

  ResNetSpec spec_;
  int max_batch_, height_, width_;
  BucketPlan plan_;
  std::vector<Parameter> parameters_;
  std::vector<T> values_, gradients_;
  std::vector<T> float_buffers_;
  std::vector<int64_t> tracked_buffers_;
  std::vector<size_t> buffer_offset_;  // by spec index
  std::vector<LayerState> layer_state_;
  std::vector<ActivationShape> max_shapes_, shapes_;
  std::vector<std::vector<T>> activations_, activation_gradients_;
  std::vector<T*> gradient_of_;  // this step's gradient of each activation: its own buffer or a shared one
  std::vector<bool> gradient_written_;
  std::vector<T> scratch_;
};

extern template class CpuResNet<float>;
extern template class CpuResNet<double>;

}  // namespace train
