#pragma once
// kernels/cuda/cuda_check.h: every CUDA runtime, cuDNN and cuBLAS call goes through one of these macros.
// A failure throws std::runtime_error naming the call, where it was made and the library's own words,
// so an error surfaces at the call that caused it instead of as a mystery three kernels later.
//
//   TRAIN_CUDA_CHECK(cudaMemcpyAsync(...));
//   TRAIN_CUDNN_CHECK(cudnnConvolutionForward(...));
//   TRAIN_CUBLAS_CHECK(cublasGemmEx(...));
//   kernel<<<grid, block, 0, stream>>>(...); TRAIN_CUDA_CHECK_LAUNCH();
//
// Kernel launches are asynchronous: TRAIN_CUDA_CHECK_LAUNCH catches bad launch configurations at once;
// faults inside a kernel show up at the next synchronising call, which is checked too.
//
// The device running out of memory (cudaErrorMemoryAllocation, cuDNN's and cuBLAS's ALLOC_FAILED) throws
// DeviceOutOfMemory, so that the engine can say "the batch does not fit" instead of "internal error".

#include "kernels/cuda/device_out_of_memory.h"

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <stdexcept>
#include <string>

namespace train::kernels::cuda::detail {

[[noreturn]] inline void throw_call_error(const char* library, const char* call, const char* file, int line,
                                          const std::string& what, bool out_of_memory) {
  const std::string message =
      std::string(library) + " call failed: " + call + " at " + file + ":" + std::to_string(line) + ": " + what;
  if (out_of_memory) throw DeviceOutOfMemory(message);
  throw std::runtime_error(message);
}

inline void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status != cudaSuccess) {
    throw_call_error("CUDA", call, file, line,
                     std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")",
                     status == cudaErrorMemoryAllocation);
  }
}

inline void check_cudnn(cudnnStatus_t status, const char* call, const char* file, int line) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw_call_error("cuDNN", call, file, line, cudnnGetErrorString(status), status == CUDNN_STATUS_ALLOC_FAILED);
  }
}

inline void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw_call_error("cuBLAS", call, file, line,
                     std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) + ")",
                     status == CUBLAS_STATUS_ALLOC_FAILED);
  }
}

}  // namespace train::kernels::cuda::detail

#define TRAIN_CUDA_CHECK(call) ::train::kernels::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
#define TRAIN_CUDNN_CHECK(call) ::train::kernels::cuda::detail::check_cudnn((call), #call, __FILE__, __LINE__)
#define TRAIN_CUBLAS_CHECK(call) ::train::kernels::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
// After a <<<...>>> launch: configuration errors (too many threads, too much shared memory) appear here.
#define TRAIN_CUDA_CHECK_LAUNCH() \
  ::train::kernels::cuda::detail::check_cuda(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
