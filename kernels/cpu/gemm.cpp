// kernels/cpu/gemm.cpp: row-major matrix product on CBLAS (OpenBLAS), split over OpenMP threads.
//
// OpenBLAS runs single-threaded; we cut C into one contiguous slab of rows (or columns) per OpenMP thread
// and make one BLAS call per slab. Slabs never split k, so every element of C is one BLAS dot product
// whatever the thread count, and one thread pool (OpenMP's) does all the work: no two pools spinning
// against each other on few cores.

#include "kernels/ops.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <climits>
#include <mutex>
#include <stdexcept>

#ifdef TRAIN_BLAS_OPENBLAS
// Declared here as well: the cblas.h found first may be another vendor's (Debian's alternatives).
extern "C" void openblas_set_num_threads(int num_threads);
#endif

namespace train::kernels {
namespace {

void make_blas_single_threaded() {
#ifdef TRAIN_BLAS_OPENBLAS
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
#endif
}

void blas(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
}

void blas(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb),
              beta, c, static_cast<int>(ldc));
}

// Below this many multiply-adds a product runs on one thread.
constexpr double kParallelMinMacs = 1 << 20;
// Slab edges are multiples of this (whole micro-kernel tiles).
constexpr std::int64_t kSlabAlign = 16;

}  // namespace

template <typename T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m <= 0 || n <= 0) return;
  for (std::int64_t v : {m, n, k, lda, ldb, ldc}) {
    if (v > INT_MAX) throw std::invalid_argument("gemm: a dimension exceeds the BLAS integer range");
  }
  if (k <= 0) {  // C = beta * C; BLAS implementations differ here, so do it ourselves
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    }
    return;
  }
  make_blas_single_threaded();

  const bool split_rows = m >= n;
  const std::int64_t extent = split_rows ? m : n;
  int parts = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) < kParallelMinMacs) parts = 1;
  parts = static_cast<int>(std::min<std::int64_t>(parts, (extent + kSlabAlign - 1) / kSlabAlign));
  if (parts <= 1) {
    blas(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  const std::int64_t tiles = (extent + kSlabAlign - 1) / kSlabAlign;
#pragma omp parallel for schedule(static) num_threads(parts)
  for (int p = 0; p < parts; ++p) {
    const std::int64_t begin = std::min(extent, tiles * p / parts * kSlabAlign);
    const std::int64_t end = std::min(extent, tiles * (p + 1) / parts * kSlabAlign);
    if (end <= begin) continue;
    if (split_rows) {  // rows [begin, end) of op(A) and C
      const T* a_part = trans_a ? a + begin : a + begin * lda;
      blas(trans_a, trans_b, end - begin, n, k, alpha, a_part, lda, b, ldb, beta, c + begin * ldc, ldc);
    } else {  // columns [begin, end) of op(B) and C
      const T* b_part = trans_b ? b + begin * ldb : b + begin;
      blas(trans_a, trans_b, m, end - begin, k, alpha, a, lda, b_part, ldb, beta, c + begin, ldc);
    }
  }
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t,
                          const float*, std::int64_t, float, float*, std::int64_t);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, double, const double*,
                           std::int64_t, const double*, std::int64_t, double, double*, std::int64_t);

}  // namespace train::kernels
