// ResNet on the GPU: the twin of CpuResNet (runtime/model/cpu_resnet.h, the specification it mirrors): the
// device storage of a ResNetPlan and the CUDA ops of kernels/cuda/ops_cuda.h on one stream; the layer walk
// is ResNetPasses', the same code the CPU model runs.
//
// T is the element type of the forward and backward pass: float (the fp32 checking mode, compared with
// CpuResNet<float> by tests/gpu/gpu_step_check) or __nv_bfloat16 (training). Whatever T is:
//   - master weights are fp32 on the device; with T = bf16 a bf16 copy of the convolution and classifier
//     weights (and the classifier bias) feeds the passes and the optimizer rewrites it after every
//     update; batch-norm gamma/beta are used in fp32 directly (the ops take them so). With T = float the
//     master weights are the weights (one copy).
//   - what is reduced across ranks and what the optimizer reads is the communication layer's flat fp32
//     buffer (the NCCL reducer's), laid out by its bucket plan exactly as the CPU model's, which the model is
//     given views into (runtime/comm/gradient_buckets.h): reduced_gradients(). Backward writes the gradients
//     in T into gradients(): with T = float that is the same buffer; with T = bf16 a buffer of the model's
//     own in the same layout, each bucket's range widened into the fp32 one (widen_gradients) before its
//     reduction, so that the average over ranks is computed in fp32 (as the CPU engine's) and not rounded to
//     bf16 at every hop.
//   - BN running statistics, saved batch statistics and momentum buffers are fp32; num_batches_tracked is
//     a host counter (it only ever counts training forwards).
//   - host-side layouts are the plan's (HostModelState): parameters concatenated in forward order (conv
//     weights OHWI), gradients in the bucket layout, BN buffers by spec index.
//
// Streams and synchronisation: every op is enqueued on context.stream() (the compute stream); nothing in
// forward_and_loss(), backward(), infer() or sgd_step() waits on the host. The caller's device inputs
// (images, labels) must be ready on that stream when the call is made (e.g. an event recorded after their
// upload, waited on by the compute stream) and must stay unchanged until the step's work has run: the first
// convolution's weight gradient reads the images again during backward. Setup and the upload/download
// functions synchronise the stream (setup time, checkpoints and checks only).
//
// Averaging: the model never averages over ranks. forward_and_loss multiplies the loss gradient by
// `gradient_scale`, like CpuResNet. Use gradient_scale = 1 with NcclGradientReducer's default ncclAvg on
// the fp32 buffer (the CUDA engine's convention: NCCL pre-multiplies by an fp32 1/ranks and sums in fp32),
// or gradient_scale = 1/ranks with ncclSum (the CPU engine's convention). Never 1/ranks with ncclAvg.
//
// Memory (ResNet-50, 224x224, bf16, measured on an H100 at batch 256: 27.5 GiB): stored activations,
// activation gradients, pooling indices and scratch; parameters, gradients, momentum and the bf16 copy add
// ~0.4 GB, cuDNN workspaces up to 1 GiB (reserved by the constructor in the context's workspace, for the
// convolutions at the largest batch). device_bytes() reports what a model actually allocated.
#pragma once

#include "common/non_copyable.h"
#include "kernels/cuda/device_out_of_memory.h"
#include "kernels/cuda/handles.h"
#include "kernels/cuda/ops_cuda.h"
#include "runtime/comm/gradient_buckets.h"
#include "runtime/model/model_state.h"
#include "runtime/model/resnet_passes.h"
#include "runtime/model/resnet_plan.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <vector>

namespace train::model {

// Where a step's results are on the device: the mean loss (fp32) and the top-1 hits of the batch
// (training-mode logits). Valid once the step's work has run and until the next forward_and_loss is
// enqueued.
struct DeviceStepResult {
  const float* loss = nullptr;
  const std::int32_t* correct = nullptr;
};

template <typename T>
class GpuResNet : public ResNetPasses<GpuResNet<T>, T>, private NonCopyable {
  using Passes = ResNetPasses<GpuResNet<T>, T>;
  friend Passes;

 public:
  // Activations are sized for plan.max_batch images; `reduced` is the fp32 gradient buffer in device memory
  // (which must outlive the model; zeroed here, padding included). Allocates all other device memory (the
  // context's convolution workspace included), zeroes the momentum buffers and the parameters (call
  // upload_state or upload_parameters before training) and uploads the optimizer's tensor table:
  // synchronises. Throws DeviceOutOfMemory when the GPU cannot hold it.
  GpuResNet(ResNetPlan plan, comm::GradientViews<float> reduced, kernels::cuda::Context& context);
  ~GpuResNet();

  // ---- state transfer (synchronise the stream) -------------------------------------------------------
  // Parameters, BN running statistics and counters, in the plan's host layout (momentum untouched).
  void upload_state(const HostModelState& state);
  HostModelState download_state() const;  // the fp32 master weights
  // The whole model state in torchvision's names and shapes (conv OIHW), from the fp32 master weights.
  ExportedTensors export_state() const;

  // All parameters in the plan's layout (forward order, conv OHWI).
  void upload_parameters(const std::vector<float>& values);
  std::vector<float> download_parameters() const;  // the fp32 master weights
  // The flat gradient buffer (bucket layout) as backward wrote it, converted to float.
  std::vector<float> download_gradients() const;
  // The fp32 buffer the optimizer reads (after widen_gradients and a reduction).
  std::vector<float> download_reduced_gradients() const;
  // Momentum buffers in the parameters' layout (for checkpoints).
  std::vector<float> download_momentum() const;
  void upload_momentum(const std::vector<float>& values);
  // BN running_mean / running_var by spec index.
  std::vector<float> download_buffer(int spec_index) const;
  void upload_buffer(int spec_index, const std::vector<float>& values);

  // ---- training and inference (enqueue only) -----------------------------------------------------------
  // Where a step's results are on the device (model::DeviceStepResult, the same for every T).
  using DeviceStepResult = model::DeviceStepResult;
  struct StepResult {
    double loss = 0;
    int correct = 0;
  };
  // A training step's first half, as CpuResNet::forward_and_loss: forward in training mode, the loss and
  // its gradient times `gradient_scale`. images: device NHWC [batch][h][w][3] in T; labels: device int32
  // [batch]. backward() (ResNetPasses) is the second half: its `on_gradient(p)` is called once per
  // parameter p (forward numbering), in the CPU model's order, right after the kernel that finishes p's
  // gradient has been ENQUEUED on the compute stream (so a reducer can record an event there);
  // `between_layers()`, when given, after each backward layer's work is enqueued.
  DeviceStepResult forward_and_loss(const T* images, const std::int32_t* labels, int batch, float label_smoothing,
                                    float gradient_scale);
  // Waits for the compute stream and reads the last step's loss and hits.
  StepResult read_step_result();
  // Enqueues the widening of gradient elements [begin, end) (bucket layout) into reduced_gradients():
  // after backward has written them, before they are reduced. Nothing to do for T = float.
  void widen_gradients(size_t begin, size_t end);
  // Forward in inference mode (running statistics) into device logits [batch][classes] in T.
  void infer(const T* images, int batch, T* logits);
  // One optimizer step over every parameter (kernels::cuda::sgd_step, multi-tensor): fp32 master weights and
  // momentum, weight decay where TensorSpec::decays() (conv and fc weights), the bf16 copy rewritten.
  // Enqueue it after the gradients are reduced (NcclGradientReducer::finish() makes the stream wait).
  void sgd_step(const kernels::SgdOptions& options);

  // ---- device pointers ----------------------------------------------------------------------------------
  size_t parameter_elements() const { return this->plan_.parameter_elements; }
  T* gradients() { return gradients_; }  // the bucket plan's total_elements values of T
  float* reduced_gradients() { return reduced_; }  // the same layout in fp32 (== gradients() for T = float)
  T* gradient_data(int p) { return gradients_ + this->gradient_offset(p); }
  float* master_data(int p) { return master_ + this->plan_.parameters[static_cast<size_t>(p)].offset; }
  // The T weights the passes read (== master_data for T = float; BN parameters: see master_data).
  T* weight_data(int p) { return weights_ + this->plan_.parameters[static_cast<size_t>(p)].offset; }
  const float* trust_ratios() const;  // the last LARS step's per-tensor ratios (device)
  kernels::cuda::Context& context() { return context_; }
  size_t device_bytes() const { return device_bytes_; }

 private:
  // The op calls of ResNetPasses (its header lists them).
  const T* take_input(const T* images, int64_t) { return images; }
  void conv_forward(const LayerPlan& layer, const kernels::Conv2dShape& shape, const T* x, T* y);
  void conv_backward_weight(const LayerPlan& layer, const kernels::Conv2dShape& shape, const T* x, const T* dy);
  void conv_backward_input(const LayerPlan& layer, const kernels::Conv2dShape& shape, const T* dy, T* dx);
  void bn_forward_train(size_t l, int64_t rows, int channels, const T* x, const T* shortcut, bool relu, T* y);
  void bn_forward_inference(const LayerPlan& layer, int64_t rows, int channels, const T* x, T* y);
  void bn_backward(size_t l, int64_t rows, int channels, const T* x, const T* relu_y, const T* dy, T* dx);
  void relu_forward(int64_t n, const T* x, T* y);
  void relu_backward(int64_t n, const T* y, const T* dy, T* dx);
  void add(int64_t n, const T* a, const T* b, T* y);
  void copy(int64_t n, const T* x, T* y);
  void max_pool_forward(size_t l, const kernels::Pool2dShape& shape, const T* x, T* y);
  void max_pool_backward(size_t l, const kernels::Pool2dShape& shape, const T* dy, T* dx);
  void avg_pool_forward(int n, int hw, int c, const T* x, T* y);
  void avg_pool_backward(int n, int hw, int c, const T* dy, T* dx);
  void fc_forward(const LayerPlan& layer, int n, int in, int out, const T* x, T* y);
  void fc_backward(const LayerPlan& layer, int n, int in, int out, const T* x, const T* dy, T* dx);

  // Device memory for the model's life (counted in device_bytes()); throws DeviceOutOfMemory.
  void* allocate_bytes(size_t bytes);
  template <typename U>
  U* allocate(size_t elements) {  // also the passes' storage (ResNetPasses::allocate_storage)
    return static_cast<U*>(allocate_bytes(sizeof(U) * elements));
  }
  float* buffer(int spec_index) { return buffers_ + this->plan_.buffer_offset.at(static_cast<size_t>(spec_index)); }
  void copy_to_device(void* device, const void* host, size_t bytes);
  void copy_to_host(void* host, const void* device, size_t bytes) const;
  std::vector<float> download_floats(const float* device, size_t count) const;

  kernels::cuda::Context& context_;
  std::vector<kernels::cuda::DeviceMemory> memory_;  // everything this model allocated
  size_t device_bytes_ = 0;

  float* master_ = nullptr;     // fp32 parameters [parameter_elements]
  T* weights_ = nullptr;        // T parameters (== master_ for T = float)
  size_t gradient_elements_ = 0;  // of the bucket plan, padding included
  float* reduced_ = nullptr;    // [gradient_elements_], the reducer's; == gradients_ for T = float
  T* gradients_ = nullptr;      // [gradient_elements_]
  float* momentum_ = nullptr;   // [parameter_elements]
  float* buffers_ = nullptr;    // running_mean / running_var
  float* bn_gradient_scratch_ = nullptr;  // bf16 only: dgamma, dbeta in fp32 before the cast
  float* loss_ = nullptr;
  std::int32_t* correct_ = nullptr;
  std::vector<typename Passes::template SavedForBackward<float>> saved_;  // by layer
  std::unique_ptr<kernels::cuda::SgdTensorTable<T>> sgd_table_;
};

extern template class GpuResNet<float>;
extern template class GpuResNet<__nv_bfloat16>;

}  // namespace train::model
