// kernels/cpu/pool.cpp: pooling over NHWC (the CPU side of kernels/cuda/pool.cu): max pooling, forward (value
// and winner) and backward, and global average pooling, forward and backward.
//
// Max pooling's backward pass is a gather: every input pixel sums dy over the windows that cover it and
// chose it, in output order (as PyTorch's scatter adds them), so no two threads ever write the same dx.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <vector>

namespace train::kernels {
namespace {

void check(const Pool2dShape& s) {
  if (s.n <= 0 || s.h <= 0 || s.w <= 0 || s.c <= 0 || s.kernel <= 0 || s.stride <= 0 || s.pad < 0 ||
      2 * s.pad > s.kernel || s.out_h() <= 0 || s.out_w() <= 0) {
    throw std::invalid_argument("max_pool: expected positive sizes, padding at most half the kernel and a window "
                                "that fits the padded input");
  }
}

// Windows [lo, hi) along one axis that contain input index i.
inline void covering(int i, int kernel, int stride, int pad, int out, int& lo, int& hi) {
  const int a = i + pad - kernel + 1;  // the first window start that still reaches i is ceil(a / stride)
  lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  hi = std::min(out, (i + pad) / stride + 1);
}

}  // namespace

template <typename T>
void max_pool_forward(const Pool2dShape& s, const T* x, T* y, std::int32_t* argmax) {
  check(s);
  const int ho = s.out_h(), wo = s.out_w(), c = s.c;
  const std::int64_t out_rows = std::int64_t{s.n} * ho;
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(s.y_size() * s.kernel * s.kernel))
  for (std::int64_t q = 0; q < out_rows; ++q) {
    const std::int64_t n = q / ho;
    const int oh = static_cast<int>(q % ho);
    const int ih0 = oh * s.stride - s.pad;
    for (int ow = 0; ow < wo; ++ow) {
      const int iw0 = ow * s.stride - s.pad;
      T* best = y + (q * wo + ow) * c;
      std::int32_t* where = argmax + (q * wo + ow) * c;
      std::fill(best, best + c, -std::numeric_limits<T>::infinity());
      std::fill(where, where + c, -1);
      for (int ih = std::max(0, ih0); ih < std::min(s.h, ih0 + s.kernel); ++ih) {
        for (int iw = std::max(0, iw0); iw < std::min(s.w, iw0 + s.kernel); ++iw) {
          const T* src = x + ((n * s.h + ih) * s.w + iw) * c;
          const std::int32_t pos = ih * s.w + iw;
          // Selects with unconditional stores rather than a branch: the loop vectorises.
          for (int ci = 0; ci < c; ++ci) {
            const T v = src[ci];
            const bool take = v > best[ci] || std::isnan(v);  // PyTorch's rule: NaN wins
            best[ci] = take ? v : best[ci];
            where[ci] = take ? pos : where[ci];
          }
        }
      }
    }
  }
}

template <typename T>
void max_pool_backward(const Pool2dShape& s, const T* dy, const std::int32_t* argmax, T* dx) {
  check(s);
  const int ho = s.out_h(), wo = s.out_w(), c = s.c;
  const std::int64_t in_rows = std::int64_t{s.n} * s.h;
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(s.x_size() * 4))
  for (std::int64_t q = 0; q < in_rows; ++q) {
    const std::int64_t n = q / s.h;
    const int ih = static_cast<int>(q % s.h);
    int oh_lo, oh_hi;
    covering(ih, s.kernel, s.stride, s.pad, ho, oh_lo, oh_hi);
    for (int iw = 0; iw < s.w; ++iw) {
      T* dst = dx + (q * s.w + iw) * c;
      std::fill(dst, dst + c, T(0));
      int ow_lo, ow_hi;
      covering(iw, s.kernel, s.stride, s.pad, wo, ow_lo, ow_hi);
      const std::int32_t pos = ih * s.w + iw;
      for (int oh = oh_lo; oh < oh_hi; ++oh) {
        for (int ow = ow_lo; ow < ow_hi; ++ow) {
          const std::int64_t o = ((n * ho + oh) * wo + ow) * c;
          // Adding +0 where another element won changes nothing (dst is never -0), and keeps the loop
          // free of branches.
          for (int ci = 0; ci < c; ++ci) {
            const T g = dy[o + ci];
            dst[ci] += argmax[o + ci] == pos ? g : T(0);
          }
        }
      }
    }
  }
}

template void max_pool_forward<float>(const Pool2dShape&, const float*, float*, std::int32_t*);
template void max_pool_forward<double>(const Pool2dShape&, const double*, double*, std::int32_t*);
template void max_pool_backward<float>(const Pool2dShape&, const float*, const std::int32_t*, float*);
template void max_pool_backward<double>(const Pool2dShape&, const double*, const std::int32_t*, double*);

template <typename T>
void global_avg_pool_forward(int n, int hw, int c, const T* x, T* y) {
  const double inv = 1.0 / static_cast<double>(hw);
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(std::int64_t{n} * hw * c))
  for (int i = 0; i < n; ++i) {
    std::vector<double> acc(static_cast<std::size_t>(c), 0.0);
    const T* xi = x + std::int64_t{i} * hw * c;
    for (int p = 0; p < hw; ++p) {
      const T* xp = xi + std::int64_t{p} * c;
      for (int ci = 0; ci < c; ++ci) acc[ci] += static_cast<double>(xp[ci]);
    }
    for (int ci = 0; ci < c; ++ci) y[std::int64_t{i} * c + ci] = static_cast<T>(acc[ci] * inv);
  }
}

template <typename T>
void global_avg_pool_backward(int n, int hw, int c, const T* dy, T* dx) {
  const T count = static_cast<T>(hw);
  const std::int64_t rows = std::int64_t{n} * hw;
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(rows * c))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* g = dy + (r / hw) * c;
    T* dst = dx + r * c;
    for (int ci = 0; ci < c; ++ci) dst[ci] = g[ci] / count;
  }
}

template void global_avg_pool_forward<float>(int, int, int, const float*, float*);
template void global_avg_pool_forward<double>(int, int, int, const double*, double*);
template void global_avg_pool_backward<float>(int, int, int, const float*, float*);
template void global_avg_pool_backward<double>(int, int, int, const double*, double*);

}  // namespace train::kernels
