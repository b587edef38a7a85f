#pragma once
// kernels/cuda/context.h: what every CUDA op needs besides its tensors: the stream it enqueues on, the
// cuDNN and cuBLAS handles bound to that stream, one reusable device workspace, and the convolution
// plans (descriptors and chosen algorithms) cached per shape.
//
// One Context per stream. Ops never synchronise the host: they only enqueue work on stream().
//
// Memory is taken up front where it can be: cuBLAS gets a workspace of its own at construction (else it
// allocates one lazily, inside the first product), and a model reserves the largest convolution workspace
// its shapes need (reserve_workspace) before it trains, so that running out of device memory is found when
// the model is made, not in its first step.

#include "kernels/cuda/handles.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <array>
#include <cstddef>
#include <map>
#include <memory>

namespace train::kernels::cuda {

struct ConvPlan;  // kernels/cuda/conv_plan.h: cuDNN descriptors and algorithms of one convolution shape

// Identifies a convolution shape and element type: n, h, w, in_c, out_c, kernel_h, kernel_w, stride_h,
// stride_w, pad_h, pad_w, element type.
using ConvPlanKey = std::array<int, 12>;

class Context {
 public:
  // Binds new cuDNN and cuBLAS handles to stream (not owned; it must outlive the Context). The
  // current device at construction is the one the handles and the workspace belong to.
  explicit Context(cudaStream_t stream);
  ~Context();  // out of line: ConvPlan is complete only in the .cu files
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  cudaStream_t stream() const { return stream_; }
  cudnnHandle_t cudnn() const { return cudnn_.get(); }
  cublasHandle_t cublas() const { return cublas_.get(); }

  // A device buffer of at least bytes (256-byte aligned) for work enqueued on stream(). The pointer is
  // valid until the next call: growing frees the old buffer stream-ordered (cudaFreeAsync), so work
  // already enqueued keeps it until done, and nothing waits on the host.
  void* workspace(std::size_t bytes);
  std::size_t workspace_bytes() const { return workspace_bytes_; }
  // Grows the workspace to at least `bytes` now (synchronously allocated: throws DeviceOutOfMemory when the
  // device has no room), so that later workspace(bytes) calls allocate nothing.
  void reserve_workspace(std::size_t bytes);

  // cuBLAS's workspace: NVIDIA recommends 32 MiB on Hopper (the cuBLAS documentation, cublasSetWorkspace).
  static constexpr std::size_t cublas_workspace_bytes = std::size_t{32} << 20;

  // Cached per shape; created by conv2d.cu on first use (host-side heuristics, no GPU work).
  std::map<ConvPlanKey, std::unique_ptr<ConvPlan>>& conv_plans() { return conv_plans_; }

 private:
  // The workspace replaced by one of `bytes` (the old one's free enqueued first, so the pool can reuse it).
  void replace_workspace(std::size_t bytes);

  // Destroyed in reverse: the plans, the workspace (in stream order), the handles, and last the cuBLAS
  // workspace (cudaFree waits for the device: nothing uses it any more).
  cudaStream_t stream_ = nullptr;
  DeviceMemory cublas_workspace_;
  CudnnHandle cudnn_;
  CublasHandle cublas_;
  StreamOrderedMemory workspace_;
  std::size_t workspace_bytes_ = 0;
  std::map<ConvPlanKey, std::unique_ptr<ConvPlan>> conv_plans_;
};

// Copies a device float to the host, waiting for the stream: the one place a loss value leaves the GPU.
float read_device_scalar(Context& context, const float* device_value);

}  // namespace train::kernels::cuda
