#pragma once
// kernels/cuda/ops_cuda.h: the GPU twins of kernels/ops.h.
//
// Same ops, same semantics, same layouts (NHWC activations, OHWI conv weights, FC weight [out][in]) and
// the same "outputs are overwritten" and aliasing rules as kernels/ops.h, whose comments are the
// specification. Differences:
//
// - Every pointer is a device pointer, and every op takes the Context first. Ops enqueue on
//   context.stream() and never synchronise the host; preconditions the host can see (sizes, label range
//   excepted) throw std::invalid_argument before anything is enqueued. CUDA/cuDNN/cuBLAS failures throw
//   std::runtime_error (kernels/cuda/cuda_check.h).
// - Two element types T for activations, weights and their gradients: float (the fp32 checking mode,
//   no TF32 anywhere) and __nv_bfloat16 (training). Whatever T is:
//     conv and FC products accumulate in fp32 (cuDNN / cuBLAS),
//     batch-norm parameters, running statistics and saved mean/invstd are fp32, statistics are summed in
//     fp64, the loss is fp32 on the device (summed in fp64), and
//     the optimizer keeps fp32 master weights and momentum (and writes a T copy of the weights).
//   Elementwise arithmetic is done in fp32 and rounded once to T.
// - softmax_cross_entropy writes the loss to a device float instead of returning it
//   (read_device_scalar() in context.h copies it out when the caller wants to wait for it). A label
//   outside [0, classes) cannot throw from the device: it makes that sample's loss, and so the mean, NaN.
// - The optimizer takes a SgdTensorTable: the tensor descriptors uploaded once, so a step is three
//   kernel launches (LARS) or one (plain SGD) over all tensors, whatever their number.
//
// Determinism: no floating-point atomics; every reduction (BN statistics and gradients, pooled sums,
// bias gradients, loss, LARS norms) sums in an order fixed by the shape alone, so the same inputs give
// bit-identical outputs run to run. Convolutions use only algorithms cuDNN reports deterministic (a
// warning on stderr says so in the rare shape where cuDNN offers none); cuBLAS is reproducible on one
// GPU model with atomics off.

#include "kernels/cuda/context.h"
#include "kernels/ops.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <span>
#include <vector>

namespace train::kernels::cuda {

using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------------------------------------------
// Convolution (kernels/cuda/conv2d.cu), cuDNN. Shapes as train::kernels::Conv2dShape.
template <typename T>
void conv2d_forward(Context& context, const Conv2dShape& s, const T* x, const T* w, T* y);
template <typename T>
void conv2d_backward_input(Context& context, const Conv2dShape& s, const T* dy, const T* w, T* dx);
template <typename T>
void conv2d_backward_weight(Context& context, const Conv2dShape& s, const T* x, const T* dy, T* dw);
// The largest workspace the three directions of this shape's convolution take, choosing their algorithms
// now (host-side heuristics, cached in the Context as the ops would): what Context::reserve_workspace needs.
template <typename T>
std::size_t conv2d_workspace_bytes(Context& context, const Conv2dShape& s);

// ---------------------------------------------------------------------------------------------------
// Batch normalisation (kernels/cuda/batch_norm.cu): rows x channels NHWC, fp32 parameters/statistics.
template <typename T>
void batch_norm_forward_train(Context& context, std::int64_t rows, int channels, const T* x, const float* gamma,
                              const float* beta, float eps, float momentum, float* running_mean,
                              float* running_var, T* y, float* save_mean, float* save_invstd);
template <typename T>
void batch_norm_relu_forward_train(Context& context, std::int64_t rows, int channels, const T* x, const T* shortcut,
                                   const float* gamma, const float* beta, float eps, float momentum,
                                   float* running_mean, float* running_var, T* y, float* save_mean,
                                   float* save_invstd);
template <typename T>
void batch_norm_backward(Context& context, std::int64_t rows, int channels, const T* x, const T* dy,
                         const float* gamma, const float* save_mean, const float* save_invstd, T* dx, float* dgamma,
                         float* dbeta);
template <typename T>
void batch_norm_relu_backward(Context& context, std::int64_t rows, int channels, const T* x, const T* y, const T* dy,
                              const float* gamma, const float* save_mean, const float* save_invstd, T* dx,
                              float* dgamma, float* dbeta);
template <typename T>
void batch_norm_forward_inference(Context& context, std::int64_t rows, int channels, const T* x, const float* gamma,
                                  const float* beta, const float* running_mean, const float* running_var, float eps,
                                  T* y);

// ---------------------------------------------------------------------------------------------------
// Elementwise (kernels/cuda/elementwise.cu).
template <typename T>
void relu_forward(Context& context, std::int64_t count, const T* x, T* y);
template <typename T>
void relu_backward(Context& context, std::int64_t count, const T* y, const T* dy, T* dx);
template <typename T>
void add(Context& context, std::int64_t count, const T* a, const T* b, T* y);
// y = x converted (round to nearest even into bf16); From/To each float or bf16.
template <typename From, typename To>
void cast(Context& context, std::int64_t count, const From* x, To* y);

// ---------------------------------------------------------------------------------------------------
// Pooling (kernels/cuda/pool.cu).
template <typename T>
void max_pool_forward(Context& context, const Pool2dShape& s, const T* x, T* y, std::int32_t* argmax);
template <typename T>
void max_pool_backward(Context& context, const Pool2dShape& s, const T* dy, const std::int32_t* argmax, T* dx);
template <typename T>
void global_avg_pool_forward(Context& context, int n, int hw, int c, const T* x, T* y);
template <typename T>
void global_avg_pool_backward(Context& context, int n, int hw, int c, const T* dy, T* dx);

// ---------------------------------------------------------------------------------------------------
// Fully connected (kernels/cuda/fully_connected.cu), cuBLAS; b and db in T.
template <typename T>
void fully_connected_forward(Context& context, int n, int in, int out, const T* x, const T* w, const T* b, T* y);
template <typename T>
void fully_connected_backward(Context& context, int n, int in, int out, const T* x, const T* w, const T* dy, T* dx,
                              T* dw, T* db);

// ---------------------------------------------------------------------------------------------------
// Softmax cross-entropy with label smoothing (kernels/cuda/cross_entropy.cu). Writes the mean loss to
// *loss (one device float) and, unless null, dlogits (may alias logits).
template <typename T>
void softmax_cross_entropy(Context& context, int n, int classes, const T* logits, const std::int32_t* labels,
                           float label_smoothing, float* loss, T* dlogits);

// ---------------------------------------------------------------------------------------------------
// Optimizer (kernels/cuda/optimizer.cu): SGD with momentum / Nesterov / LARS over all tensors at once,
// the arithmetic of train::kernels::sgd_step in fp32 on fp32 master weights and fp32 gradients (the reduced
// average over ranks). G is the type of the weights' copy the passes read (T).
template <typename G>
struct SgdTensor {
  float* param = nullptr;            // fp32 master weights, updated in place
  const float* grad = nullptr;       // fp32
  float* momentum_buffer = nullptr;  // fp32, zero before the first step; may be null when momentum == 0
  G* param_copy = nullptr;           // receives the updated weights in G (the bf16 model); null: none
  std::int64_t count = 0;
  bool weight_decay = true;          // false for batch norm and bias parameters
};

// The descriptors of a fixed set of tensors in device memory, uploaded once (the pointers of a model's
// parameters do not move between steps), plus the chunk map the multi-tensor kernels walk and the
// scratch of the LARS norms. Construction and destruction synchronise (setup time only).
template <typename G>
class SgdTensorTable {
 public:
  SgdTensorTable(Context& context, std::span<const SgdTensor<G>> tensors);

  int tensor_count() const { return tensor_count_; }
  int chunk_count() const { return chunk_count_; }
  // Per tensor, the trust ratio of the last LARS step (1 where LARS does not apply, and before any
  // LARS step): device floats.
  const float* trust_ratios() const { return trust(); }
  // False when some tensor has no momentum buffer (then only momentum == 0 steps are allowed).
  bool has_momentum_buffers() const { return momentum_buffers_; }

  // Device-side layout, used by optimizer.cu.
  const void* device_tensors() const { return tensors_.get(); }
  const void* device_chunks() const { return chunks_.get(); }
  double* norm_partials() const { return as<double>(norm_partials_); }
  float* trust() const { return as<float>(trust_); }

 private:
  int tensor_count_ = 0;
  int chunk_count_ = 0;
  bool momentum_buffers_ = true;
  DeviceMemory tensors_;
  DeviceMemory chunks_;
  DeviceMemory norm_partials_;
  DeviceMemory trust_;
};

template <typename G>
void sgd_step(Context& context, const SgdTensorTable<G>& table, const SgdOptions& options);

}  // namespace train::kernels::cuda
