#pragma once
// kernels/cuda/device_clock.h: times taken on the device in stream order, for what a host clock cannot see
// without stopping the GPU: how long one stream waited for another (the compute stream for the gradient
// reductions at the end of backward). The device's global timer counts nanoseconds (1 us resolution or
// better on the GPUs we run on) and is the same for every stream of the device.

#include <cuda_runtime_api.h>

namespace train::ops::cuda {

// Enqueues on `stream` the write of the global timer into *slot, when the stream gets there.
void record_device_time(cudaStream_t stream, unsigned long long* slot);

// Enqueues on `stream`: *seconds += max(0, *to - *from) / 1e9. Both times must have been written by work
// that `stream` has waited for.
void add_elapsed_seconds(cudaStream_t stream, const unsigned long long* from, const unsigned long long* to,
                         double* seconds);

}  // namespace train::ops::cuda
