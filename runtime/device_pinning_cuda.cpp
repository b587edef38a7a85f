// The CUDA build: pin by cudaSetDevice and a probe kernel; batches in cudaHostAlloc memory.
#include "runtime/device_pinning.h"

#include "kernels/cuda/device_probe.h"
#include "kernels/cuda/handles.h"
#include "runtime/data/loader/host_memory.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <atomic>
#include <stdexcept>

namespace train {

namespace {

void check(cudaError_t status, const char* call, int index) {
  if (status != cudaSuccess) {
    throw std::runtime_error(fmt::format("GPU {}: {} failed: {} ({})", index, call, cudaGetErrorName(status),
                                         cudaGetErrorString(status)));
  }
}

// The rank's GPU, for threads other than the one that pinned it: the current device is per thread and
// starts at 0, so a thread that calls CUDA without setting it makes a context on GPU 0.
std::atomic<int> pinned_device{0};

}  // namespace

std::string pin_gpu(int index) {
  check(cudaSetDevice(index), "cudaSetDevice", index);
  pinned_device = index;
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties", index);
  constexpr int count = 1024;
  void* allocated = nullptr;
  check(cudaMalloc(&allocated, count * sizeof(int)), "cudaMalloc", index);
  const kernels::cuda::DeviceMemory memory(allocated);
  int* device_values = kernels::cuda::as<int>(memory);
  int host_values[count] = {};
  cudaError_t launched = kernels::cuda::launch_device_probe(device_values, count, index + 7, nullptr);
  cudaError_t copied = launched == cudaSuccess
                           ? cudaMemcpy(host_values, device_values, sizeof host_values, cudaMemcpyDeviceToHost)
                           : launched;
  check(launched, "launch_device_probe", index);
  check(copied, "cudaMemcpy", index);
  for (int i = 0; i < count; ++i) {
    if (host_values[i] != i * (index + 7)) {
      throw std::runtime_error(fmt::format("GPU {}: the probe kernel wrote {} at {} instead of {}", index,
                                           host_values[i], i, i * (index + 7)));
    }
  }
  return fmt::format("cuda:{} ({}, {:.1f} GiB, sm_{}{})", index, properties.name,
                     static_cast<double>(properties.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0), properties.major,
                     properties.minor);
}

namespace {

// Called from the data loader's threads, which never set a device of their own: set the rank's first (a
// pinned allocation needs a context, and on an 8-GPU host every rank would otherwise add one to GPU 0,
// running it out of memory first, and failing outright where GPUs are in EXCLUSIVE_PROCESS mode).
void* pinned_allocate(size_t bytes) {
  void* pointer = nullptr;
  if (cudaSetDevice(pinned_device) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  // Portable: usable by any device context of this process, not only the current one.
  if (cudaHostAlloc(&pointer, bytes == 0 ? 1 : bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;  // the allocator turns this into std::bad_alloc
  }
  return pointer;
}

void pinned_release(void* pointer) {
  cudaSetDevice(pinned_device);  // as pinned_allocate: no context on GPU 0 from a thread that frees
  cudaFreeHost(pointer);
}

}  // namespace

void use_pinned_host_memory() {
  data::set_host_memory_functions(data::HostMemoryFunctions{pinned_allocate, pinned_release, "pinned memory"});
}

}  // namespace train
