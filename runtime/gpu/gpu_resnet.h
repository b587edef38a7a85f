// ResNet on the GPU: the twin of CpuResNet (runtime/cpu_resnet.h, the specification it mirrors), executing
// a ResNetSpec with the CUDA ops of kernels/cuda/ops_cuda.h on one stream.
//
// T is the element type of the forward and backward pass: float (the fp32 checking mode, compared with
// CpuResNet<float> by tests/gpu/gpu_step_check) or __nv_bfloat16 (training). Whatever T is:
//   - master weights are fp32 on the device; with T = bf16 a bf16 copy of the convolution and classifier
//     weights (and the classifier bias) feeds the passes and the optimizer rewrites it after every
//     update; batch-norm gamma/beta are used in fp32 directly (the ops take them so). With T = float the
//     master weights are the weights (one copy).
//   - the gradients live in ONE flat device buffer of T laid out by plan_buckets(...) exactly as the CPU
//     model's (same sizes, same threshold, same 1 MiB first bucket), so a NcclGradientReducer over
//     gradients() with bucket_plan() reduces the same buckets as the CPU's MPI reducer.
//   - BN running statistics, saved batch statistics and momentum buffers are fp32; num_batches_tracked is
//     a host counter (it only ever counts training forwards).
//   - host-side layouts are the CPU model's: parameters concatenated in forward order (conv weights OHWI,
//     CpuResNet::parameters()[p].offset), gradients in the bucket layout (gradient_offset), BN buffers by
//     spec index.
//
// Streams and synchronisation: every op is enqueued on context.stream() (the compute stream); nothing in
// train_step(), infer() or sgd_step() waits on the host. The caller's device inputs (images, labels) must
// be ready on that stream when the call is made (e.g. an event recorded after their upload, waited on by
// the compute stream) and must stay unchanged until the step's work has run: the first convolution's
// weight gradient reads the images again during backward. Setup and the upload/download functions
// synchronise the stream (setup time and checks only).
//
// Averaging: the model never averages over ranks. train_step multiplies the loss gradient by
// `gradient_scale`, like CpuResNet. Use gradient_scale = 1 with NcclGradientReducer's default ncclAvg
// (the GPU trainer's convention: NCCL pre-multiplies by 1/ranks and sums), or gradient_scale = 1/ranks
// with ncclSum (the CPU trainer's convention). Never 1/ranks together with ncclAvg.
//
// Memory (ResNet-50, 224x224, bf16, estimated from the shapes): about 45 MB of stored activations and 67 MB
// of activation gradients per image, plus 2.4 MB of pooling indices and scratch: ~115 MB per image, ~29 GB
// at 256 images per GPU; parameters, gradients, momentum and the bf16 copy add ~0.3 GB, cuDNN workspaces
// up to 1 GiB. device_bytes() reports what a model actually allocated.
#pragma once

#include "kernels/cuda/ops_cuda.h"
#include "runtime/cpu_resnet.h"
#include "runtime/gradient_buckets.h"
#include "runtime/layer_fusion.h"
#include "runtime/model_state.h"
#include "runtime/resnet_spec.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace train::gpu {

namespace detail {
struct DeviceFree {
  void operator()(void* pointer) const noexcept;
};
using DeviceMemory = std::unique_ptr<void, DeviceFree>;
}  // namespace detail

template <typename T>
class GpuResNet {
 public:
  // Activations are sized for `max_batch` images of `height` x `width` (as CpuResNet). Allocates all
  // device memory, zeroes the momentum buffers and the parameters (call initialize_from or
  // upload_parameters before training) and uploads the optimizer's tensor table: synchronises.
  GpuResNet(ResNetSpec spec, int max_batch, int height, int width, size_t bucket_bytes,
            ops::cuda::Context& context);
  ~GpuResNet();
  GpuResNet(const GpuResNet&) = delete;
  GpuResNet& operator=(const GpuResNet&) = delete;

  // ---- state transfer (synchronise the stream) -------------------------------------------------------
  // Parameters, BN running statistics and num_batches_tracked from a CPU model of the same spec (e.g. one
  // just initialize()d with the job's seed, or loaded from a weights file); momentum buffers zeroed.
  void initialize_from(CpuResNet<float>& model);
  // The reverse: the fp32 master weights, running statistics and counters into a CPU model of the spec.
  void copy_to(CpuResNet<float>& model) const;

  // All parameters in the CPU model's layout (CpuResNet::all_values(): forward order, conv OHWI).
  void upload_parameters(const std::vector<float>& values);
  std::vector<float> download_parameters() const;  // the fp32 master weights
  // The flat gradient buffer (bucket layout, CpuResNet::all_gradients()), converted to float.
  std::vector<float> download_gradients() const;
  // Momentum buffers in the parameters' layout (for checkpoints).
  std::vector<float> download_momentum() const;
  void upload_momentum(const std::vector<float>& values);
  // BN running_mean / running_var by spec index.
  std::vector<float> download_buffer(int spec_index) const;
  void upload_buffer(int spec_index, const std::vector<float>& values);
  int64_t& batches_tracked(int spec_index);

  // ---- training and inference (enqueue only) -----------------------------------------------------------
  // Where a step's results are on the device: the mean loss (fp32) and the top-1 hits of the batch
  // (training-mode logits). Valid once the step's work has run and until the next train_step is enqueued.
  struct DeviceStepResult {
    const float* loss = nullptr;
    const std::int32_t* correct = nullptr;
  };
  struct StepResult {
    double loss = 0;
    int correct = 0;
  };
  // Forward in training mode, loss, backward, as CpuResNet::train_step. images: device NHWC [batch][h][w][3]
  // in T; labels: device int32 [batch]. `on_gradient(p)` is called once per parameter p (forward
  // numbering), in the CPU model's order, right after the kernel that finishes p's gradient has been
  // ENQUEUED on the compute stream (so a reducer can record an event there); `between_layers()`, when
  // given, after each backward layer's work is enqueued.
  DeviceStepResult train_step(const T* images, const std::int32_t* labels, int batch, float label_smoothing,
                              float gradient_scale, const std::function<void(int)>& on_gradient,
                              const std::function<void()>& between_layers = {});
  // Waits for the compute stream and reads the last step's loss and hits.
  StepResult read_step_result();
  // Forward in inference mode (running statistics) into device logits [batch][classes] in T.
  void infer(const T* images, int batch, T* logits);
  // One optimizer step over every parameter (ops::cuda::sgd_step, multi-tensor): fp32 master weights and
  // momentum, weight decay where TensorSpec::decays() (conv and fc weights), the bf16 copy rewritten.
  // Enqueue it after the gradients are reduced (NcclGradientReducer::finish() makes the stream wait).
  void sgd_step(const ops::SgdOptions& options);

  // ---- description and device pointers ----------------------------------------------------------------
  const ResNetSpec& spec() const { return spec_; }
  const BucketPlan& bucket_plan() const { return plan_; }
  int parameter_tensors() const { return static_cast<int>(parameters_.size()); }
  struct Parameter {
    int spec_index = 0;  // into spec().tensors
    size_t offset = 0;   // into the parameter (and momentum) storage
    size_t gradient_offset = 0;
    int64_t count = 0;
  };
  const std::vector<Parameter>& parameters() const { return parameters_; }
  size_t parameter_elements() const { return parameter_elements_; }
  T* gradients() { return gradients_; }  // plan.total_elements values of T
  T* gradient_data(int p) { return gradients_ + parameters_[static_cast<size_t>(p)].gradient_offset; }
  float* master_data(int p) { return master_ + parameters_[static_cast<size_t>(p)].offset; }
  // The T weights the passes read (== master_data for T = float; BN parameters: see master_data).
  T* weight_data(int p) { return weights_ + parameters_[static_cast<size_t>(p)].offset; }
  const float* trust_ratios() const;  // the last LARS step's per-tensor ratios (device)
  ops::cuda::Context& context() { return context_; }
  int max_batch() const { return max_batch_; }
  size_t device_bytes() const { return device_bytes_; }

 private:
  struct ActivationShape {
    int n = 0, h = 0, w = 0, c = 0;
    int64_t size() const { return int64_t{n} * h * w * c; }
  };
  struct LayerState : LayerFusion {  // the fusion plan's entry (shared with CpuResNet), and:
    int weight = -1, bias = -1;
    int running_mean = -1, running_var = -1, tracked = -1;
    float* save_mean = nullptr;
    float* save_invstd = nullptr;
    std::int32_t* argmax = nullptr;
  };

  void* allocate(size_t bytes);
  void plan_fusion();
  void forward(const T* images, int batch, bool training);
  void batch_norm_train(const LayerSpec& bn, LayerState& state, const T* shortcut, bool relu, T* y);
  void set_batch(int batch);
  const T* activation(int a) const { return a == 0 ? input_ : activation_[static_cast<size_t>(a)]; }
  T* relu_output(const LayerState& fused) {
    return activation_[static_cast<size_t>(spec_.layers[static_cast<size_t>(fused.relu_layer)].output)];
  }
  T* gradient_target(int activation, bool& accumulate);
  void finish_gradient(int activation, bool accumulate);
  float* buffer(int spec_index) { return buffers_ + buffer_offset_.at(static_cast<size_t>(spec_index)); }
  void copy_to_device(void* device, const void* host, size_t bytes);
  void copy_to_host(void* host, const void* device, size_t bytes) const;

  ops::cuda::Context& context_;
  ResNetSpec spec_;
  int max_batch_, height_, width_;
  BucketPlan plan_;
  std::vector<Parameter> parameters_;
  size_t parameter_elements_ = 0;
  std::vector<detail::DeviceMemory> memory_;  // everything this model allocated
  size_t device_bytes_ = 0;

  float* master_ = nullptr;     // fp32 parameters [parameter_elements_]
  T* weights_ = nullptr;        // T parameters (== master_ for T = float)
  T* gradients_ = nullptr;      // [plan_.total_elements]
  float* momentum_ = nullptr;   // [parameter_elements_]
  float* buffers_ = nullptr;    // running_mean / running_var
  std::vector<size_t> buffer_offset_;  // by spec index
  std::vector<int64_t> tracked_;       // num_batches_tracked, by buffer_offset_ of its spec index
  float* bn_gradient_scratch_ = nullptr;  // bf16 only: dgamma, dbeta in fp32 before the cast
  int max_bn_channels_ = 0;
  float* loss_ = nullptr;
  std::int32_t* correct_ = nullptr;

  std::vector<LayerState> layer_state_;
  std::vector<ActivationShape> max_shapes_, shapes_;
  // Device storage of each activation (index 0, the images, is the caller's: input_). An activation the
  // fused training pass never writes (a BN output fused into its ReLU or residual add, an add output
  // fused into its ReLU) shares the storage of the ReLU output it is fused into: inference writes it
  // there and finishes in place.
  std::vector<T*> activation_;
  const T* input_ = nullptr;
  std::vector<T*> gradient_buffer_;  // each activation's own gradient storage (null where never needed)
  std::vector<T*> gradient_of_;      // this step's gradient of each activation: its own or a shared one
  std::vector<bool> gradient_written_;
  T* scratch_ = nullptr;
  std::unique_ptr<ops::cuda::SgdTensorTable<T>> sgd_table_;
};

// Every parameter and buffer in torchvision's state_dict order and shapes (conv weights OIHW), as F32
// from the fp32 master weights: what model_io::write_model_files and checkpoints take (as
// train::export_model_state does for a CpuResNet).
template <typename T>
ExportedTensors export_model_state(GpuResNet<T>& model);

extern template class GpuResNet<float>;
extern template class GpuResNet<__nv_bfloat16>;

}  // namespace train::gpu
