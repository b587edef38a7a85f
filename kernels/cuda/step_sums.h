#pragma once
// kernels/cuda/step_sums.h: a training step's figures summed on the device, in stream order, until the host
// reads them at a log line (the CUDA engine's step observer): the host never waits for a step to count it.

#include <cuda_runtime_api.h>

#include <cstdint>

namespace train::kernels::cuda {

// Enqueues on `stream`: sums[0] += *loss * n, sums[1] += n, sums[2] += *hits. One thread: no atomics, the
// same sums every run.
void add_step_sums(cudaStream_t stream, const float* loss, const std::int32_t* hits, int n, double* sums);

}  // namespace train::kernels::cuda
