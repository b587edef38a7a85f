// The CPU-only build's answer: no GPUs, and why.
#include "job/gpu_inventory.h"

namespace train {

bool built_with_cuda() { return false; }

GpuInventory query_gpus() { return GpuInventory{{}, "this train binary was built without CUDA"}; }

}  // namespace train
