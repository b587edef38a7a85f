// kernels/cpu/fully_connected.cpp: the classifier layer y = x * w^T + b, forward and backward.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <vector>

namespace train::kernels {

template <typename T>
void fully_connected_forward(int n, int in, int out, const T* x, const T* w, const T* b, T* y) {
  gemm<T>(false, true, n, out, in, T(1), x, in, w, in, T(0), y, out);
  if (b == nullptr) return;
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(std::int64_t{n} * out))
  for (int i = 0; i < n; ++i) {
    T* yi = y + std::int64_t{i} * out;
    for (int o = 0; o < out; ++o) yi[o] += b[o];
  }
}

template <typename T>
void fully_connected_backward(int n, int in, int out, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db) {
  if (dx != nullptr) gemm<T>(false, false, n, in, out, T(1), dy, out, w, in, T(0), dx, in);
  gemm<T>(true, false, out, in, n, T(1), dy, out, x, in, T(0), dw, in);
  if (db == nullptr) return;
  std::vector<double> sums(static_cast<std::size_t>(out));
  cpu::column_sums(n, out, dy, sums.data());
  for (int o = 0; o < out; ++o) db[o] = static_cast<T>(sums[o]);
}

template void fully_connected_forward<float>(int, int, int, const float*, const float*, const float*, float*);
template void fully_connected_forward<double>(int, int, int, const double*, const double*, const double*, double*);
template void fully_connected_backward<float>(int, int, int, const float*, const float*, const float*, float*,
                                              float*, float*);
template void fully_connected_backward<double>(int, int, int, const double*, const double*, const double*,
                                               double*, double*, double*);

}  // namespace train::kernels
