// kernels/cuda/pool.cu: max pooling (forward with argmax, backward) and global average pooling over
// NHWC on the GPU.
//
// One thread per output value with the channel fastest, so a warp reads consecutive channels of one
// pixel. The max-pool backward is a gather (each input value sums the windows that chose it, in window
// order), as the CPU reference: no atomics, and the same sums in the same order.

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

#include <stdexcept>

namespace train::kernels::cuda {
namespace {

using device::from_float;
using device::to_float;

void check(const Pool2dShape& s) {
  if (s.n <= 0 || s.h <= 0 || s.w <= 0 || s.c <= 0 || s.kernel <= 0 || s.stride <= 0 || s.pad < 0 ||
      2 * s.pad > s.kernel || s.out_h() <= 0 || s.out_w() <= 0) {
    throw std::invalid_argument("max_pool: expected positive sizes, padding at most half the kernel and a window "
                                "that fits the padded input");
  }
}

// The window [start, start + kernel) clipped to [0, size).
__device__ __forceinline__ void clip_window(int start, int kernel, int size, int& lo, int& hi) {
  lo = max(0, start);
  hi = min(size, start + kernel);
}

template <typename T>
__global__ void max_pool_forward_kernel(Pool2dShape s, int out_h, int out_w, std::int64_t count, const T* x, T* y,
                                        std::int32_t* argmax) {
  for (std::int64_t i = device::global_thread(); i < count; i += device::grid_stride()) {
    const int c = static_cast<int>(i % s.c);
    std::int64_t rest = i / s.c;
    const int ow = static_cast<int>(rest % out_w);
    rest /= out_w;
    const int oh = static_cast<int>(rest % out_h);
    const std::int64_t n = rest / out_h;
    int ih_lo, ih_hi, iw_lo, iw_hi;
    clip_window(oh * s.stride - s.pad, s.kernel, s.h, ih_lo, ih_hi);
    clip_window(ow * s.stride - s.pad, s.kernel, s.w, iw_lo, iw_hi);
    float best = -INFINITY;
    std::int32_t where = -1;
    for (int ih = ih_lo; ih < ih_hi; ++ih) {
      for (int iw = iw_lo; iw < iw_hi; ++iw) {
        const float v = to_float(x[((n * s.h + ih) * s.w + iw) * s.c + c]);
        // The CPU reference's rule: a strictly larger value or a NaN takes the place (first wins ties).
        if (v > best || isnan(v)) {
          best = v;
          where = ih * s.w + iw;
        }
      }
    }
    y[i] = from_float<T>(best);  // exact: best is a converted T
    argmax[i] = where;
  }
}

// Output windows [lo, hi) along one axis that contain input index i (as the CPU reference).
__device__ __forceinline__ void covering(int i, int kernel, int stride, int pad, int out, int& lo, int& hi) {
  const int a = i + pad - kernel + 1;
  lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  hi = min(out, (i + pad) / stride + 1);
}

template <typename T>
__global__ void max_pool_backward_kernel(Pool2dShape s, int out_h, int out_w, std::int64_t count, const T* dy,
                                         const std::int32_t* argmax, T* dx) {
  for (std::int64_t i = device::global_thread(); i < count; i += device::grid_stride()) {
    const int c = static_cast<int>(i % s.c);
    std::int64_t rest = i / s.c;
    const int iw = static_cast<int>(rest % s.w);
    rest /= s.w;
    const int ih = static_cast<int>(rest % s.h);
    const std::int64_t n = rest / s.h;
    int oh_lo, oh_hi, ow_lo, ow_hi;
    covering(ih, s.kernel, s.stride, s.pad, out_h, oh_lo, oh_hi);
    covering(iw, s.kernel, s.stride, s.pad, out_w, ow_lo, ow_hi);
    const std::int32_t pos = ih * s.w + iw;
    float sum = 0.0f;
    for (int oh = oh_lo; oh < oh_hi; ++oh) {
      for (int ow = ow_lo; ow < ow_hi; ++ow) {
        const std::int64_t o = ((n * out_h + oh) * out_w + ow) * s.c + c;
        if (argmax[o] == pos) sum += to_float(dy[o]);
      }
    }
    dx[i] = from_float<T>(sum);
  }
}

template <typename T>
__global__ void global_avg_pool_forward_kernel(int n, int hw, int c, const T* x, T* y) {
  const std::int64_t count = static_cast<std::int64_t>(n) * c;
  const double inv = 1.0 / static_cast<double>(hw);
  for (std::int64_t i = device::global_thread(); i < count; i += device::grid_stride()) {
    const std::int64_t image = i / c;
    const int channel = static_cast<int>(i % c);
    const T* xi = x + image * hw * c + channel;
    double sum = 0.0;
    for (int p = 0; p < hw; ++p) sum += static_cast<double>(to_float(xi[static_cast<std::int64_t>(p) * c]));
    y[i] = from_float<T>(static_cast<float>(sum * inv));
  }
}

template <typename T>
__global__ void global_avg_pool_backward_kernel(int hw, int c, std::int64_t count, const T* dy, T* dx) {
  const float pixels = static_cast<float>(hw);
  for (std::int64_t i = device::global_thread(); i < count; i += device::grid_stride()) {
    const std::int64_t row = i / c;  // n * hw + p
    const int channel = static_cast<int>(i % c);
    dx[i] = from_float<T>(to_float(dy[(row / hw) * c + channel]) / pixels);
  }
}

}  // namespace

template <typename T>
void max_pool_forward(Context& context, const Pool2dShape& s, const T* x, T* y, std::int32_t* argmax) {
  check(s);
  const std::int64_t count = s.y_size();
  max_pool_forward_kernel<T><<<plan::elementwise_blocks(count), plan::kElementwiseThreads, 0, context.stream()>>>(
      s, s.out_h(), s.out_w(), count, x, y, argmax);
  TRAIN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void max_pool_backward(Context& context, const Pool2dShape& s, const T* dy, const std::int32_t* argmax, T* dx) {
  check(s);
  const std::int64_t count = s.x_size();
  max_pool_backward_kernel<T><<<plan::elementwise_blocks(count), plan::kElementwiseThreads, 0, context.stream()>>>(
      s, s.out_h(), s.out_w(), count, dy, argmax, dx);
  TRAIN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void global_avg_pool_forward(Context& context, int n, int hw, int c, const T* x, T* y) {
  if (n <= 0 || hw <= 0 || c <= 0) throw std::invalid_argument("global_avg_pool_forward: expected positive sizes");
  const std::int64_t count = static_cast<std::int64_t>(n) * c;
  global_avg_pool_forward_kernel<T>
      <<<plan::elementwise_blocks(count), plan::kElementwiseThreads, 0, context.stream()>>>(n, hw, c, x, y);
  TRAIN_CUDA_CHECK_LAUNCH();
}

template <typename T>
void global_avg_pool_backward(Context& context, int n, int hw, int c, const T* dy, T* dx) {
  if (n <= 0 || hw <= 0 || c <= 0) throw std::invalid_argument("global_avg_pool_backward: expected positive sizes");
  const std::int64_t count = static_cast<std::int64_t>(n) * hw * c;
  global_avg_pool_backward_kernel<T>
      <<<plan::elementwise_blocks(count), plan::kElementwiseThreads, 0, context.stream()>>>(hw, c, count, dy, dx);
  TRAIN_CUDA_CHECK_LAUNCH();
}

#define TRAIN_INSTANTIATE(T)                                                                                   \
  template void max_pool_forward<T>(Context&, const Pool2dShape&, const T*, T*, std::int32_t*);               \
  template void max_pool_backward<T>(Context&, const Pool2dShape&, const T*, const std::int32_t*, T*);        \
  template void global_avg_pool_forward<T>(Context&, int, int, int, const T*, T*);                            \
  template void global_avg_pool_backward<T>(Context&, int, int, int, const T*, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(bf16)
#undef TRAIN_INSTANTIATE

}  // namespace train::kernels::cuda
