// The CPU-only build's answer: no GPUs, and why.
#include "device_query.h"

namespace train {

bool built_with_cuda() { return false; }

GpuInventory query_gpus() { return GpuInventory{{}, "this train binary was built without CUDA"}; }

}  // namespace train

#include <stdexcept>

namespace train {

std::string pin_gpu(int index) {
  throw std::runtime_error("cannot use GPU " + std::to_string(index) + ": this train binary was built without CUDA");
}

}  // namespace train

namespace train {

void use_pinned_host_memory() {}  // no GPU to copy to: ordinary memory serves

}  // namespace train
