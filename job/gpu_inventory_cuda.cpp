// The CUDA build asks the runtime. With no driver or no device the runtime returns an error code, which
// here means "no GPUs" (the CPU backend takes over), not a failure.
#include "job/gpu_inventory.h"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

namespace train {

bool built_with_cuda() { return true; }

GpuInventory query_gpus() {
  GpuInventory inventory;
  int count = 0;
  cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    inventory.note = fmt::format("the CUDA runtime reports {} ({})", cudaGetErrorName(status),
                                 cudaGetErrorString(status));
    cudaGetLastError();  // clear the sticky error state for later callers
    return inventory;
  }
  for (int index = 0; index < count; ++index) {
    cudaDeviceProp properties{};
    status = cudaGetDeviceProperties(&properties, index);
    if (status != cudaSuccess) {
      inventory.note = fmt::format("cudaGetDeviceProperties({}) failed: {}", index, cudaGetErrorString(status));
      inventory.gpus.clear();
      return inventory;
    }
    inventory.gpus.push_back(GpuInfo{index, properties.name, properties.totalGlobalMem, properties.major,
                                     properties.minor});
  }
  if (count == 0) inventory.note = "the CUDA runtime sees no GPU";
  return inventory;
}

}  // namespace train
