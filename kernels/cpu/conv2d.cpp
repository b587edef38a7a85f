// kernels/cpu/conv2d.cpp: 2-D convolution, forward and both gradients, NHWC activations, OHWI weights.
//
// im2col + GEMM. A column matrix has one row per output pixel (n, oh, ow) and one column per weight
// position (kh, kw, c), the order of a row of the OHWI weight, so with K = KH*KW*C:
//   forward          y[rows][O]    = col[rows][K] * w^T             (w is [O][K])
//   backward input   dcol[rows][K] = dy[rows][O] * w, then col2im: a gather, each dx pixel sums the
//                    column entries that read it, in (kh, kw) order (no scatter, no atomics)
//   backward weight  dw[O][K]      = sum over row blocks of dy^T[O][rows] * col[rows][K]
// Each OpenMP thread owns one contiguous share of the work (output rows; dx rows; columns of dw) and
// works through it in blocks whose column matrix (at most conv2d_workspace_limit() bytes) it builds
// and consumes itself while it is hot in cache: one parallel region per call, no barrier inside. Blocks
// of the input gradient may span images, so small images still make few, large products: a product
// packs the whole weight matrix, and one per image (4 rows at 2x2) cost more in packing than in arithmetic.
// When the whole column matrix of forward or input gradient fits one block (deep layers of small images),
// it is one product over the batch, split by gemm() along its larger side so each thread packs only its
// share of the weights.
// A 1x1 convolution with stride 1 and no padding needs no column matrix: x itself is [n*h*w][C].

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>

namespace train::kernels {
namespace {

std::atomic<std::size_t> workspace_limit{std::size_t{8} << 20};

void check(const Conv2dShape& s) {
  if (s.n <= 0 || s.h <= 0 || s.w <= 0 || s.in_c <= 0 || s.out_c <= 0 || s.kernel_h <= 0 || s.kernel_w <= 0 ||
      s.stride_h <= 0 || s.stride_w <= 0 || s.pad_h < 0 || s.pad_w < 0) {
    throw std::invalid_argument("conv2d: expected positive sizes, kernel and stride and non-negative padding");
  }
  if (s.h + 2 * s.pad_h < s.kernel_h || s.w + 2 * s.pad_w < s.kernel_w) {
    throw std::invalid_argument("conv2d: the kernel is larger than the padded input (" + std::to_string(s.h) +
                                "x" + std::to_string(s.w) + " padded by " + std::to_string(s.pad_h) + "," +
                                std::to_string(s.pad_w) + ", kernel " + std::to_string(s.kernel_h) + "x" +
                                std::to_string(s.kernel_w) + ")");
  }
}

bool is_pointwise(const Conv2dShape& s) {
  return s.kernel_h == 1 && s.kernel_w == 1 && s.stride_h == 1 && s.stride_w == 1 && s.pad_h == 0 && s.pad_w == 0;
}

// Rows of a column block `width` values wide that fit the workspace limit (at least one).
template <typename T>
std::int64_t block_rows(std::int64_t width) {
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(workspace_limit.load() / (width * sizeof(T))));
}

// Threads for work of this many values: the whole team, or the calling thread alone when it is small.
int team_size(std::int64_t work) { return cpu::parallel_worth(work) ? omp_get_max_threads() : 1; }

// Windows [lo, hi) along one axis (out windows of `kernel`, `stride`, `pad`) that contain input index i.
inline void covering(int i, int kernel, int stride, int pad, int out, int& lo, int& hi) {
  const int a = i + pad - kernel + 1;  // the first window start that still reaches i is ceil(a / stride)
  lo = a <= 0 ? 0 : (a + stride - 1) / stride;
  hi = std::min(out, (i + pad) / stride + 1);
}

// col[r - r0][k - k0] for output rows r in [r0, r1) and columns k in [k0, k1): the receptive fields of
// x, zeros where they reach into padding. Columns of one kernel row kh are [kh*KW*C, (kh+1)*KW*C): zeros
// for kernel columns left of the image, then consecutive input pixels, then zeros right of it.
template <typename T>
void im2col(const Conv2dShape& s, const T* x, std::int64_t r0, std::int64_t r1, std::int64_t k0, std::int64_t k1,
            T* col) {
  const int ho = s.out_h(), wo = s.out_w(), c = s.in_c;
  const std::int64_t seg = std::int64_t{s.kernel_w} * c;
  const std::int64_t ld = k1 - k0;
  const int kh_first = static_cast<int>(k0 / seg), kh_last = static_cast<int>((k1 - 1) / seg);
  for (std::int64_t r = r0; r < r1; ++r) {
    const std::int64_t n = r / (std::int64_t{ho} * wo);
    const int oh = static_cast<int>(r / wo % ho);
    const int ow = static_cast<int>(r % wo);
    const int iw0 = ow * s.stride_w - s.pad_w;
    const int kw_lo = std::max(0, -iw0);
    const int kw_hi = std::min(s.kernel_w, s.w - iw0);
    T* row = col + (r - r0) * ld;
    for (int kh = kh_first; kh <= kh_last; ++kh) {
      const std::int64_t base = kh * seg;
      const int ih = oh * s.stride_h - s.pad_h + kh;
      const bool inside = ih >= 0 && ih < s.h && kw_hi > kw_lo;
      const std::int64_t copy_begin = base + (inside ? std::int64_t{kw_lo} * c : seg);
      const std::int64_t copy_end = base + (inside ? std::int64_t{kw_hi} * c : seg);
      // zeros [base, copy_begin), input [copy_begin, copy_end), zeros [copy_end, base + seg); within [k0, k1)
      const std::int64_t z0 = std::max(base, k0), z1 = std::min(copy_begin, k1);
      if (z0 < z1) std::fill(row + (z0 - k0), row + (z1 - k0), T(0));
      const std::int64_t c0 = std::max(copy_begin, k0), c1 = std::min(copy_end, k1);
      if (c0 < c1) {
        const T* src = x + ((n * s.h + ih) * s.w + iw0 + kw_lo) * c + (c0 - copy_begin);
        std::copy(src, src + (c1 - c0), row + (c0 - k0));
      }
      const std::int64_t e0 = std::max(copy_end, k0), e1 = std::min(base + seg, k1);
      if (e0 < e1) std::fill(row + (e0 - k0), row + (e1 - k0), T(0));
    }
  }
}

// Output rows, numbered n * out_h + oh across the batch, that dx rows [q0, q1) (numbered n * h + ih) read:
// [first, last). Both ends only grow with q, so the range of a block of dx rows is that of its ends.
void output_rows_read(const Conv2dShape& s, std::int64_t q0, std::int64_t q1, std::int64_t& first,
                      std::int64_t& last) {
  const int ho = s.out_h();
  int lo, hi;
  covering(static_cast<int>(q0 % s.h), s.kernel_h, s.stride_h, s.pad_h, ho, lo, hi);
  first = q0 / s.h * ho + lo;
  covering(static_cast<int>((q1 - 1) % s.h), s.kernel_h, s.stride_h, s.pad_h, ho, lo, hi);
  last = std::max(first, (q1 - 1) / s.h * ho + hi);
}

// dx rows [q0, q1) (numbered n * h + ih, possibly spanning images) from dcol, the column matrix of output
// rows [first, ...) (numbered n * out_h + oh): each dx pixel sums the column entries that read it, in
// (kh, kw) order. Rows no window reads come out zero.
template <typename T>
void col2im(const Conv2dShape& s, const T* dcol, std::int64_t first, std::int64_t q0, std::int64_t q1, T* dx) {
  const int ho = s.out_h(), wo = s.out_w(), c = s.in_c;
  const std::int64_t k = std::int64_t{s.kernel_h} * s.kernel_w * c;
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t n = q / s.h;
    const int ih = static_cast<int>(q % s.h);
    T* row = dx + q * s.w * c;
    std::fill(row, row + std::int64_t{s.w} * c, T(0));
    for (int kh = 0; kh < s.kernel_h; ++kh) {
      const int t = ih + s.pad_h - kh;
      if (t < 0 || t % s.stride_h != 0 || t / s.stride_h >= ho) continue;
      const T* dcol_row = dcol + ((n * ho + t / s.stride_h) - first) * wo * k;
      for (int kw = 0; kw < s.kernel_w; ++kw) {
        // Output columns whose input column iw = ow * stride - pad + kw lies in [0, w).
        const int lo = s.pad_w - kw;
        const int hi = s.w - 1 + s.pad_w - kw;
        if (hi < 0) continue;
        const int ow_lo = lo <= 0 ? 0 : (lo + s.stride_w - 1) / s.stride_w;
        const int ow_hi = std::min(wo, hi / s.stride_w + 1);
        for (int ow = ow_lo; ow < ow_hi; ++ow) {
          const int iw = ow * s.stride_w - s.pad_w + kw;
          const T* src = dcol_row + std::int64_t{ow} * k + (std::int64_t{kh} * s.kernel_w + kw) * c;
          T* dst = row + std::int64_t{iw} * c;
          for (int ci = 0; ci < c; ++ci) dst[ci] += src[ci];
        }
      }
    }
  }
}

}  // namespace

void set_conv2d_workspace_limit(std::size_t bytes) { workspace_limit.store(bytes); }
std::size_t conv2d_workspace_limit() { return workspace_limit.load(); }

template <typename T>
void conv2d_forward(const Conv2dShape& s, const T* x, const T* w, T* y) {
  check(s);
  const std::int64_t k = std::int64_t{s.kernel_h} * s.kernel_w * s.in_c;
  const int o = s.out_c;
  if (is_pointwise(s)) {
    gemm<T>(false, true, std::int64_t{s.n} * s.h * s.w, o, k, T(1), x, k, w, k, T(0), y, o);
    return;
  }
  const std::int64_t rows = std::int64_t{s.n} * s.out_h() * s.out_w();
  const std::int64_t block = block_rows<T>(k);
  if (rows <= block) {
    // The whole column matrix fits one block (small images, deep layers): build it on all threads, then
    // one product split along its larger side, so each thread packs only its share of the weights.
    T* col = cpu::thread_scratch<T>(static_cast<std::size_t>(rows * k));
#pragma omp parallel num_threads(team_size(rows * k))
    {
      const int t = omp_get_thread_num(), threads = omp_get_num_threads();
      im2col(s, x, rows * t / threads, rows * (t + 1) / threads, 0, k, col + rows * t / threads * k);
    }
    gemm<T>(false, true, rows, o, k, T(1), col, k, w, k, T(0), y, o);
    return;
  }
#pragma omp parallel num_threads(team_size(rows * k))
  {
    // This thread's output rows, in blocks: build the block's columns, multiply, next block.
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const std::int64_t begin = rows * t / threads, end = rows * (t + 1) / threads;
    if (begin < end) {
      T* col = cpu::thread_scratch<T>(static_cast<std::size_t>(std::min(block, end - begin) * k));
      for (std::int64_t r0 = begin; r0 < end; r0 += block) {
        const std::int64_t r1 = std::min(end, r0 + block);
        im2col(s, x, r0, r1, 0, k, col);
        gemm<T>(false, true, r1 - r0, o, k, T(1), col, k, w, k, T(0), y + r0 * o, o);
      }
    }
  }
}

template <typename T>
void conv2d_backward_input(const Conv2dShape& s, const T* dy, const T* w, T* dx) {
  check(s);
  const std::int64_t k = std::int64_t{s.kernel_h} * s.kernel_w * s.in_c;
  const int o = s.out_c, ho = s.out_h(), wo = s.out_w();
  if (is_pointwise(s)) {
    gemm<T>(false, false, std::int64_t{s.n} * s.h * s.w, s.in_c, o, T(1), dy, o, w, s.in_c, T(0), dx, s.in_c);
    return;
  }
  const std::int64_t dx_rows = std::int64_t{s.n} * s.h;  // rows (n, ih) of dx, numbered n * h + ih
  const std::int64_t rows = std::int64_t{s.n} * ho * wo;
  if (rows <= block_rows<T>(k)) {
    // The whole dcol fits one block: one product split along its larger side (each thread packs only
    // its share of the weights), then every thread gathers its dx rows.
    T* dcol = cpu::thread_scratch<T>(static_cast<std::size_t>(rows * k));
    gemm<T>(false, false, rows, k, o, T(1), dy, o, w, k, T(0), dcol, k);
#pragma omp parallel num_threads(team_size(rows * k))
    {
      const int t = omp_get_thread_num(), threads = omp_get_num_threads();
      col2im(s, dcol, 0, dx_rows * t / threads, dx_rows * (t + 1) / threads, dx);
    }
    return;
  }
  // Blocks of dx rows whose output rows (with the kernel's halo) fit the limit; a block may span images,
  // so small images still make few, large products.
  const std::int64_t out_rows_per_block = block_rows<T>(std::int64_t{wo} * k);
#pragma omp parallel num_threads(team_size(rows * k))
  {
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const std::int64_t end = dx_rows * (t + 1) / threads;
    for (std::int64_t q = dx_rows * t / threads; q < end;) {
      // The most dx rows from q whose output rows fit (at least one): the count read only grows with them.
      std::int64_t fits = 1, too_many = end - q + 1;
      while (too_many - fits > 1) {
        const std::int64_t mid = (fits + too_many) / 2;
        std::int64_t first, last;
        output_rows_read(s, q, q + mid, first, last);
        (last - first <= out_rows_per_block ? fits : too_many) = mid;
      }
      std::int64_t first, last;
      output_rows_read(s, q, q + fits, first, last);
      T* dcol = nullptr;
      if (last > first) {
        const std::int64_t m = (last - first) * wo;
        dcol = cpu::thread_scratch<T>(static_cast<std::size_t>(m * k));
        gemm<T>(false, false, m, k, o, T(1), dy + first * wo * o, o, w, k, T(0), dcol, k);
      }
      col2im(s, dcol, first, q, q + fits, dx);
      q += fits;
    }
  }
}

template <typename T>
void conv2d_backward_weight(const Conv2dShape& s, const T* x, const T* dy, T* dw) {
  check(s);
  const std::int64_t k = std::int64_t{s.kernel_h} * s.kernel_w * s.in_c;
  const int o = s.out_c;
  if (is_pointwise(s)) {
    gemm<T>(true, false, o, s.in_c, std::int64_t{s.n} * s.h * s.w, T(1), dy, o, x, s.in_c, T(0), dw, s.in_c);
    return;
  }
  const std::int64_t rows = std::int64_t{s.n} * s.out_h() * s.out_w();
#pragma omp parallel num_threads(team_size(rows * k))
  {
    // This thread's columns [k0, k1) of dw: it builds those columns of col block by block and sums
    // dy^T * col over all rows itself, so no partial sums need combining.
    const int t = omp_get_thread_num(), threads = omp_get_num_threads();
    const std::int64_t k0 = k * t / threads, k1 = k * (t + 1) / threads;
    if (k0 < k1) {
      const std::int64_t block = std::min(rows, block_rows<T>(k1 - k0));
      T* col = cpu::thread_scratch<T>(static_cast<std::size_t>(block * (k1 - k0)));
      for (std::int64_t r0 = 0; r0 < rows; r0 += block) {
        const std::int64_t r1 = std::min(rows, r0 + block);
        im2col(s, x, r0, r1, k0, k1, col);
        gemm<T>(true, false, o, k1 - k0, r1 - r0, T(1), dy + r0 * o, o, col, k1 - k0, r0 == 0 ? T(0) : T(1),
                dw + k0, k);
      }
    }
  }
}

#define TRAIN_INSTANTIATE(T)                                                                 \
  template void conv2d_forward<T>(const Conv2dShape&, const T*, const T*, T*);               \
  template void conv2d_backward_input<T>(const Conv2dShape&, const T*, const T*, T*);        \
  template void conv2d_backward_weight<T>(const Conv2dShape&, const T*, const T*, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(double)
#undef TRAIN_INSTANTIATE

}  // namespace train::kernels
