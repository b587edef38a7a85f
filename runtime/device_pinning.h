// Pinning a rank to its GPU, and the host memory its batches live in. A CPU-only build refuses to pin and
// keeps ordinary host memory.
#pragma once

#include <string>

namespace train {

// Makes GPU `index` this process's device and runs a small kernel on it to prove it works. Returns a
// description such as "cuda:0 (NVIDIA H100 80GB HBM3, 79.1 GiB, sm_90)". Throws std::runtime_error naming
// the failing CUDA call.
std::string pin_gpu(int index);

// From now on, batch buffers (runtime/data/loader/host_memory.h) are page-locked memory from cudaHostAlloc,
// which the device copies from at full speed and asynchronously. A CPU-only build has nothing to do.
void use_pinned_host_memory();

}  // namespace train
