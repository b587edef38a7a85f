#include "kernels/cuda/device_probe.h"

namespace train::kernels::cuda {

namespace {

__global__ void fill_probe(int* values, int count, int factor) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) values[i] = i * factor;
}

}  // namespace

cudaError_t launch_device_probe(int* values, int count, int factor, cudaStream_t stream) {
  constexpr int threads = 256;
  fill_probe<<<(count + threads - 1) / threads, threads, 0, stream>>>(values, count, factor);
  cudaError_t launched = cudaGetLastError();
  if (launched != cudaSuccess) return launched;
  return cudaStreamSynchronize(stream);
}

}  // namespace train::kernels::cuda
