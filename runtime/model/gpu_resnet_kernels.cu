// runtime/model/gpu_resnet_kernels.cu: the loss-gradient scale and the top-1 count of GpuResNet's step.

#include "kernels/cuda/cuda_check.h"
#include "runtime/model/gpu_resnet_kernels.h"

#include <stdexcept>

namespace train::model::detail {
namespace {

__device__ __forceinline__ float load_float(float v) { return v; }
__device__ __forceinline__ float load_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ void store_float(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_float(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

constexpr int kScaleThreads = 256;
constexpr std::int64_t kScaleMaxBlocks = 4096;

template <typename T>
__global__ void scale_kernel(std::int64_t count, T* values, float scale) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += stride) {
    store_float(values + i, load_float(values[i]) * scale);
  }
}

constexpr int kTop1Threads = 256;  // 8 warps, one row per warp at a time
constexpr int kTop1Warps = kTop1Threads / 32;

template <typename T>
__global__ void __launch_bounds__(kTop1Threads)
    top1_kernel(int n, int classes, const T* logits, const std::int32_t* labels, std::int32_t* hits) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warp_hits = 0;  // meaningful in lane 0
  for (int row = warp; row < n; row += kTop1Warps) {
    const T* z = logits + static_cast<std::int64_t>(row) * classes;
    // Each lane: the first largest of its classes lane, lane + 32, ... (strictly greater replaces).
    float best = -INFINITY;
    int best_index = -1;
    for (int j = lane; j < classes; j += 32) {
      const float v = load_float(z[j]);
      if (best_index < 0 || v > best) {
        best = v;
        best_index = j;
      }
    }
    // Combine lanes: the larger value wins; on a tie the smaller index (the first in row order).
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, best, offset);
      const int other_index = __shfl_down_sync(0xffffffffu, best_index, offset);
      if (other_index >= 0 &&
          (best_index < 0 || other > best || (other == best && other_index < best_index))) {
        best = other;
        best_index = other_index;
      }
    }
    if (lane == 0 && best_index == labels[row]) ++warp_hits;
  }
  __shared__ int per_warp[kTop1Warps];
  if (lane == 0) per_warp[warp] = warp_hits;
  __syncthreads();
  if (threadIdx.x == 0) {
    int total = 0;
    for (int w = 0; w < kTop1Warps; ++w) total += per_warp[w];
    *hits = total;
  }
}

}  // namespace

template <typename T>
void scale_values(cudaStream_t stream, std::int64_t count, T* values, float scale) {
  if (count < 0) throw std::invalid_argument("scale_values: negative count");
  if (count == 0) return;
  std::int64_t blocks = (count + kScaleThreads - 1) / kScaleThreads;
  if (blocks > kScaleMaxBlocks) blocks = kScaleMaxBlocks;
  scale_kernel<T><<<static_cast<int>(blocks), kScaleThreads, 0, stream>>>(count, values, scale);
  TRAIN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void count_top1(cudaStream_t stream, int n, int classes, const T* logits, const std::int32_t* labels,
                std::int32_t* hits) {
  if (n <= 0 || classes <= 0) throw std::invalid_argument("count_top1: expected positive sizes");
  top1_kernel<T><<<1, kTop1Threads, 0, stream>>>(n, classes, logits, labels, hits);
  TRAIN_CUDA_CHECK_LAUNCH();
}

template void scale_values<float>(cudaStream_t, std::int64_t, float*, float);
template void scale_values<__nv_bfloat16>(cudaStream_t, std::int64_t, __nv_bfloat16*, float);
template void count_top1<float>(cudaStream_t, int, int, const float*, const std::int32_t*, std::int32_t*);
template void count_top1<__nv_bfloat16>(cudaStream_t, int, int, const __nv_bfloat16*, const std::int32_t*,
                                        std::int32_t*);

}  // namespace train::model::detail
