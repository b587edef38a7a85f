// kernels/cuda/context.cu: handles, the stream-ordered workspace and the device-scalar read.

#include "kernels/cuda/context.h"
#include "kernels/cuda/conv_plan.h"
#include "kernels/cuda/cuda_check.h"

#include <cublas_v2.h>

namespace train::kernels::cuda {

Context::Context(cudaStream_t stream) : stream_(stream) {
  cudnnHandle_t cudnn = nullptr;
  TRAIN_CUDNN_CHECK(cudnnCreate(&cudnn));
  cudnn_.reset(cudnn);
  TRAIN_CUDNN_CHECK(cudnnSetStream(cudnn, stream_));
  cublasHandle_t cublas = nullptr;
  TRAIN_CUBLAS_CHECK(cublasCreate(&cublas));
  cublas_.reset(cublas);
  TRAIN_CUBLAS_CHECK(cublasSetStream(cublas, stream_));
  // Default math: no TF32 for fp32 products (the fp32 mode is the checking mode and must match the CPU
  // to 1e-4); bf16 products use tensor cores whatever the mode. Atomics stay off (their default), so
  // results are reproducible run to run.
  TRAIN_CUBLAS_CHECK(cublasSetMathMode(cublas, CUBLAS_DEFAULT_MATH));
  TRAIN_CUBLAS_CHECK(cublasSetAtomicsMode(cublas, CUBLAS_ATOMICS_NOT_ALLOWED));
  TRAIN_CUBLAS_CHECK(cublasSetPointerMode(cublas, CUBLAS_POINTER_MODE_HOST));
  cublas_workspace_ = allocate_device(cublas_workspace_bytes);
  TRAIN_CUBLAS_CHECK(cublasSetWorkspace(cublas, cublas_workspace_.get(), cublas_workspace_bytes));
}

Context::~Context() = default;

void Context::replace_workspace(std::size_t bytes) {
  if (workspace_) {
    workspace_bytes_ = 0;
    TRAIN_CUDA_CHECK(cudaFreeAsync(workspace_.release(), stream_));
  }
  void* pointer = nullptr;
  TRAIN_CUDA_CHECK(cudaMallocAsync(&pointer, bytes, stream_));
  workspace_ = StreamOrderedMemory(pointer, FreeOnStream{stream_});
  workspace_bytes_ = bytes;
}

void* Context::workspace(std::size_t bytes) {
  if (bytes <= workspace_bytes_ && workspace_) return workspace_.get();
  // Grow geometrically so a sequence of slightly larger requests does not reallocate every time.
  std::size_t grown = workspace_bytes_ + workspace_bytes_ / 2;
  if (grown < bytes) grown = bytes;
  if (grown < 256) grown = 256;
  replace_workspace(grown);
  return workspace_.get();
}

void Context::reserve_workspace(std::size_t bytes) {
  if (bytes <= workspace_bytes_ && workspace_) return;
  replace_workspace(bytes < 256 ? 256 : bytes);
  // An asynchronous allocation may report running out of memory only when the stream reaches it.
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

float read_device_scalar(Context& context, const float* device_value) {
  float value = 0.0f;
  TRAIN_CUDA_CHECK(cudaMemcpyAsync(&value, device_value, sizeof(float), cudaMemcpyDeviceToHost, context.stream()));
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
  return value;
}

}  // namespace train::kernels::cuda
