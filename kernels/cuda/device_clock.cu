// kernels/cuda/device_clock.cu: the global timer read in stream order (kernels/cuda/device_clock.h).

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_clock.h"

namespace train::ops::cuda {
namespace {

__global__ void write_global_timer(unsigned long long* slot) {
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  *slot = now;
}

__global__ void accumulate_elapsed(const unsigned long long* from, const unsigned long long* to, double* seconds) {
  const unsigned long long start = *from, end = *to;
  if (end > start) *seconds += static_cast<double>(end - start) * 1e-9;
}

}  // namespace

void record_device_time(cudaStream_t stream, unsigned long long* slot) {
  write_global_timer<<<1, 1, 0, stream>>>(slot);
  TRAIN_CUDA_CHECK_LAUNCH();
}

void add_elapsed_seconds(cudaStream_t stream, const unsigned long long* from, const unsigned long long* to,
                         double* seconds) {
  accumulate_elapsed<<<1, 1, 0, stream>>>(from, to, seconds);
  TRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace train::ops::cuda
