// The CUDA build: pin by cudaSetDevice and a probe kernel; batches in cudaHostAlloc memory.
#include "runtime/device_pinning.h"

#include "kernels/cuda/device_probe.h"
#include "runtime/data/host_memory.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <stdexcept>

namespace train {

namespace {

void check(cudaError_t status, const char* call, int index) {
  if (status != cudaSuccess) {
    throw std::runtime_error(fmt::format("GPU {}: {} failed: {} ({})", index, call, cudaGetErrorName(status),
                                         cudaGetErrorString(status)));
  }
}

}  // namespace

std::string pin_gpu(int index) {
  check(cudaSetDevice(index), "cudaSetDevice", index);
  cudaDeviceProp properties{};
  check(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties", index);
  constexpr int count = 1024;
  int* device_values = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&device_values), count * sizeof(int)), "cudaMalloc", index);
  int host_values[count] = {};
  cudaError_t launched = launch_device_probe(device_values, count, index + 7, nullptr);
  cudaError_t copied = launched == cudaSuccess
                           ? cudaMemcpy(host_values, device_values, sizeof host_values, cudaMemcpyDeviceToHost)
                           : launched;
  cudaFree(device_values);
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

void* pinned_allocate(size_t bytes) {
  void* pointer = nullptr;
  // Portable: usable by any device context of this process, not only the current one.
  if (cudaHostAlloc(&pointer, bytes == 0 ? 1 : bytes, cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;  // the allocator turns this into std::bad_alloc
  }
  return pointer;
}

void pinned_release(void* pointer) { cudaFreeHost(pointer); }

}  // namespace

void use_pinned_host_memory() {
  data::set_host_memory_functions(data::HostMemoryFunctions{pinned_allocate, pinned_release, "pinned memory"});
}

}  // namespace train
