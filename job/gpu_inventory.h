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
