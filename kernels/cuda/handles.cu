// kernels/cuda/handles.cu: making the owned handles of kernels/cuda/handles.h, every call checked.

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/handles.h"

#include <string>

namespace train::kernels::cuda {

Stream make_stream(StreamPriority priority) {
  cudaStream_t stream = nullptr;
  if (priority == StreamPriority::highest) {
    int least = 0, greatest = 0;
    TRAIN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    TRAIN_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, greatest));
  } else {
    TRAIN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  }
  return Stream(stream);
}

Event make_event() {
  cudaEvent_t event = nullptr;
  TRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return Event(event);
}

DeviceMemory try_allocate_device(std::size_t bytes) {
  void* pointer = nullptr;
  const cudaError_t status = cudaMalloc(&pointer, bytes == 0 ? 1 : bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();  // clear it: the caller reports and the process goes on to exit cleanly
    return DeviceMemory();
  }
  TRAIN_CUDA_CHECK(status);
  return DeviceMemory(pointer);
}

DeviceMemory allocate_device(std::size_t bytes) {
  DeviceMemory memory = try_allocate_device(bytes);
  if (!memory) throw DeviceOutOfMemory("cudaMalloc of " + std::to_string(bytes) + " bytes: the GPU has no room left");
  return memory;
}

PinnedMemory allocate_pinned(std::size_t bytes, unsigned int flags) {
  void* pointer = nullptr;
  const cudaError_t status = cudaHostAlloc(&pointer, bytes == 0 ? 1 : bytes, flags);
  if (status != cudaSuccess) {
    detail::throw_call_error("CUDA", "cudaHostAlloc", __FILE__, __LINE__,
                             std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) + ")",
                             /*out_of_memory=*/false);
  }
  return PinnedMemory(pointer);
}

}  // namespace train::kernels::cuda
