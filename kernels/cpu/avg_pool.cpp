// kernels/cpu/avg_pool.cpp: global average pooling over NHWC, forward and backward.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <vector>

namespace train::kernels {

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
