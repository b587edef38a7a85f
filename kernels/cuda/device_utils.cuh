#pragma once
// kernels/cuda/device_utils.cuh (internal): conversions, vector loads and deterministic block
// reductions shared by the hand-written kernels.

#include "kernels/cuda/launch_plan.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace train::kernels::cuda::device {

// fp32 is the arithmetic type of every elementwise kernel; T is only what is stored.
__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

// V consecutive elements moved as one 16-byte (or smaller) memory transaction. The host checks that
// pointers are aligned to sizeof(Pack) and that V divides the extent before choosing V > 1.
template <typename T, int V>
struct alignas(sizeof(T) * V) Pack {
  T v[V];
};
template <typename T, int V>
__device__ __forceinline__ Pack<T, V> load_pack(const T* p) {
  return *reinterpret_cast<const Pack<T, V>*>(p);
}
template <typename T, int V>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, V>& value) {
  *reinterpret_cast<Pack<T, V>*>(p) = value;
}
// Elements per 16-byte pack: 4 floats or 8 bf16.
template <typename T>
inline constexpr int kPackWidth = 16 / static_cast<int>(sizeof(T));

// Warp sum in a fixed shuffle order; the result is valid in lane 0.
template <typename V>
__device__ __forceinline__ V warp_sum(V v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

// Sum over a 1-D block of kThreads threads, returned to every thread. Fixed order (warps by shuffle tree,
// then warp results by shuffle tree), so the result is reproducible bit for bit. Every thread of the
// block must call it (it synchronises); consecutive calls are safe (it synchronises before returning).
template <int kThreads, typename V>
__device__ V block_sum(V v) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  constexpr int kWarps = kThreads / 32;
  __shared__ V warp_results[kWarps];
  __shared__ V result;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    V s = lane < kWarps ? warp_results[lane] : V(0);
    s = warp_sum(s);
    if (lane == 0) result = s;
  }
  __syncthreads();
  const V total = result;
  __syncthreads();
  return total;
}

// Maximum over a 1-D block, NaN ignored as fmaxf does (std::fmax in the CPU reference), to every thread.
template <int kThreads>
__device__ float block_max(float v) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "whole warps, at most 1024 threads");
  constexpr int kWarps = kThreads / 32;
  __shared__ float warp_results[kWarps];
  __shared__ float result;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_max(v);
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float m = lane < kWarps ? warp_results[lane] : -INFINITY;
    m = warp_max(m);
    if (lane == 0) result = m;
  }
  __syncthreads();
  const float total = result;
  __syncthreads();
  return total;
}

// Index of the first element of this thread and the grid stride, 64-bit (tensors pass 2^31 elements
// at batch 256).
__device__ __forceinline__ std::int64_t global_thread() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

}  // namespace train::kernels::cuda::device

namespace train::kernels::cuda {
// True when p is aligned for a pack of `bytes` bytes.
inline bool aligned_to(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}
}  // namespace train::kernels::cuda
