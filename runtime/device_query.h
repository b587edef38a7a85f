// How many GPUs this process can use, asked of the CUDA runtime. A CPU-only build, or a machine without
// a driver, answers zero with a note saying why.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace train {

struct GpuInfo {
  int index = 0;
  std::string name;
  size_t memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
};

struct GpuInventory {
  std::vector<GpuInfo> gpus;
  std::string note;  // why there are none ("built without CUDA", "no CUDA driver", ...); empty otherwise
};

bool built_with_cuda();
GpuInventory query_gpus();

}  // namespace train

namespace train {

// Makes GPU `index` this process's device and runs a small kernel on it to prove it works. Returns a
// description such as "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90)". Throws std::runtime_error naming
// the failing CUDA call.
std::string pin_gpu(int index);

// From now on, batch buffers (data/host_memory.h) are page-locked memory from cudaHostAlloc, which the
// device copies from at full speed and asynchronously. A CPU-only build has nothing to do.
void use_pinned_host_memory();

}  // namespace train
