// A trivial kernel that proves a pinned GPU executes code: values[i] = i * factor.
#pragma once

#include <cuda_runtime_api.h>

namespace train::kernels::cuda {

cudaError_t launch_device_probe(int* values, int count, int factor, cudaStream_t stream);

}  // namespace train::kernels::cuda
