// The CPU-only build: no GPU to pin, ordinary host memory for batches.
#include "runtime/device_pinning.h"

#include <stdexcept>

namespace train {

std::string pin_gpu(int index) {
  throw std::runtime_error("cannot use GPU " + std::to_string(index) + ": this train binary was built without CUDA");
}

void use_pinned_host_memory() {}  // no GPU to copy to: ordinary memory serves

}  // namespace train
