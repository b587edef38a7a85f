// kernels/cuda/context.cu: handles, the stream-ordered workspace and the device-scalar read.

#include "kernels/cuda/context.h"
#include "kernels/cuda/conv_plan.h"
#include "kernels/cuda/cuda_check.h"

#include <cublas_v2.h>

namespace train::ops::cuda {

Context::Context(cudaStream_t stream) : stream_(stream) {
  TRAIN_CUDNN_CHECK(cudnnCreate(&cudnn_));
  TRAIN_CUDNN_CHECK(cudnnSetStream(cudnn_, stream_));
  TRAIN_CUBLAS_CHECK(cublasCreate(&cublas_));
  TRAIN_CUBLAS_CHECK(cublasSetStream(cublas_, stream_));
  // Default math: no TF32 for fp32 products (the fp32 mode is the checking mode and must match the CPU
  // to 1e-4); bf16 products use tensor cores whatever the mode. Atomics stay off (their default), so
  // results are reproducible run to run.
  TRAIN_CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  TRAIN_CUBLAS_CHECK(cublasSetAtomicsMode(cublas_, CUBLAS_ATOMICS_NOT_ALLOWED));
  TRAIN_CUBLAS_CHECK(cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_HOST));
  TRAIN_CUDA_CHECK(cudaMalloc(&cublas_workspace_, cublas_workspace_bytes));
  TRAIN_CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_, cublas_workspace_bytes));
}

Context::~Context() {
  conv_plans_.clear();
  // Destructors must not throw; a failure here would only leak.
  if (workspace_ != nullptr) cudaFreeAsync(workspace_, stream_);
  if (cublas_ != nullptr) cublasDestroy(cublas_);
  if (cudnn_ != nullptr) cudnnDestroy(cudnn_);
  if (cublas_workspace_ != nullptr) cudaFree(cublas_workspace_);  // waits for the device: nothing uses it any more
}

void* Context::workspace(std::size_t bytes) {
  if (bytes <= workspace_bytes_ && workspace_ != nullptr) return workspace_;
  // Grow geometrically so a sequence of slightly larger requests does not reallocate every time.
  std::size_t grown = workspace_bytes_ + workspace_bytes_ / 2;
  if (grown < bytes) grown = bytes;
  if (grown < 256) grown = 256;
  if (workspace_ != nullptr) {
    TRAIN_CUDA_CHECK(cudaFreeAsync(workspace_, stream_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  TRAIN_CUDA_CHECK(cudaMallocAsync(&workspace_, grown, stream_));
  workspace_bytes_ = grown;
  return workspace_;
}

void Context::reserve_workspace(std::size_t bytes) {
  if (bytes <= workspace_bytes_ && workspace_ != nullptr) return;
  if (workspace_ != nullptr) {
    TRAIN_CUDA_CHECK(cudaFreeAsync(workspace_, stream_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  const std::size_t reserved = bytes < 256 ? 256 : bytes;
  TRAIN_CUDA_CHECK(cudaMallocAsync(&workspace_, reserved, stream_));
  workspace_bytes_ = reserved;
  // An asynchronous allocation may report running out of memory only when the stream reaches it.
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

float read_device_scalar(Context& context, const float* device_value) {
  float value = 0.0f;
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(&value, device_value, sizeof(float), cudaMemcpyDeviceToHost, context.stream()));
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
  return value;
}

}  // namespace train::ops::cuda
