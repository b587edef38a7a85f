#pragma once
// kernels/cuda/handles.h: the one way a CUDA, cuDNN or cuBLAS resource is owned: a unique owner (a
// std::unique_ptr over the handle, every one of which is a pointer) that destroys it when it goes away and
// never throws doing so (the device may be in an error state after a failure; a destructor cannot report).
// Moving hands the resource on; get() lends it to the API calls.
//
// Everything GPU-side that creates a handle holds it so: the ops' Context (cuDNN, cuBLAS, workspaces), the
// convolution plans, the optimizer's table, the device clock probe, the GPU model and the CUDA engine (which
// also creates the streams and events the NCCL reducer enqueues on: runtime/comm/ owns no handle and
// includes of kernels/ only kernels/cuda/cuda_check.h, so the reducer borrows them; docs/architecture.md).
//
// This header checks nothing itself: the factories in handles.cu do, with kernels/cuda/cuda_check.h.

#include <cublas_api.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstddef>
#include <memory>
#include <type_traits>

namespace train::kernels::cuda {

namespace detail {
template <auto destroy>
struct Destroy {
  template <typename Handle>
  void operator()(Handle handle) const noexcept {
    static_cast<void>(destroy(handle));  // its status is of no use here
  }
};
}  // namespace detail

// The owner of a handle that `destroy` releases.
template <typename Handle, auto destroy>
using Owned = std::unique_ptr<std::remove_pointer_t<Handle>, detail::Destroy<destroy>>;

using Stream = Owned<cudaStream_t, cudaStreamDestroy>;
using Event = Owned<cudaEvent_t, cudaEventDestroy>;
using DeviceMemory = Owned<void*, cudaFree>;        // cudaFree waits for the device's work first
using PinnedMemory = Owned<void*, cudaFreeHost>;    // page-locked host memory (cudaHostAlloc)
using CudnnHandle = Owned<cudnnHandle_t, cudnnDestroy>;
using CublasHandle = Owned<cublasHandle_t, cublasDestroy_v2>;  // cublas_v2.h names it cublasDestroy
using CudnnTensorDescriptor = Owned<cudnnTensorDescriptor_t, cudnnDestroyTensorDescriptor>;
using CudnnFilterDescriptor = Owned<cudnnFilterDescriptor_t, cudnnDestroyFilterDescriptor>;
using CudnnConvolutionDescriptor = Owned<cudnnConvolutionDescriptor_t, cudnnDestroyConvolutionDescriptor>;

// Device memory freed in the order of `stream` (cudaFreeAsync): work already enqueued there keeps it until
// it has run, and nothing waits on the host.
struct FreeOnStream {
  cudaStream_t stream = nullptr;
  void operator()(void* pointer) const noexcept { static_cast<void>(cudaFreeAsync(pointer, stream)); }
};
using StreamOrderedMemory = std::unique_ptr<void, FreeOnStream>;

// A typed view of memory an owner holds.
template <typename T, typename Memory>
T* as(const Memory& memory) {
  return static_cast<T*>(memory.get());
}

// ---- making them (kernels/cuda/handles.cu); each throws when CUDA refuses --------------------------------

enum class StreamPriority { normal, highest };
// A non-blocking stream (it never waits for the legacy default stream). `highest`: the device's highest
// priority, for short latency-bound work that must not queue behind long kernels (the gradient reductions,
// the device clock probe).
Stream make_stream(StreamPriority priority = StreamPriority::normal);
// Without timing: the cheapest to record and to wait on.
Event make_event();
// cudaMalloc of `bytes` (at least 1). try_allocate_device: empty when the device has no room left (the error
// cleared, so that the caller can say what did not fit); any other failure throws. allocate_device: throws
// DeviceOutOfMemory (kernels/cuda/device_out_of_memory.h) naming the bytes when there is no room.
DeviceMemory try_allocate_device(std::size_t bytes);
DeviceMemory allocate_device(std::size_t bytes);
// cudaHostAlloc of `bytes` (at least 1) with `flags` (cudaHostAllocPortable: usable from every device;
// cudaHostAllocMapped: the device may address it). Running out of host memory throws std::runtime_error,
// not DeviceOutOfMemory: it is not the GPU that is full.
PinnedMemory allocate_pinned(std::size_t bytes, unsigned int flags = cudaHostAllocPortable);

}  // namespace train::kernels::cuda
