// kernels/cpu/elementwise.cpp: the elementwise ops (the CPU side of kernels/cuda/elementwise.cu): ReLU
// forward and backward, and the sum: the residual add (its backward is the identity on both inputs, which
// needs no kernel) and the junction where two gradient flows meet.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

namespace train::kernels {

template <typename T>
void relu_forward(std::int64_t count, const T* x, T* y) {
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) y[i] = x[i] < T(0) ? T(0) : x[i];  // NaN passes, as torch.relu
}

template <typename T>
void relu_backward(std::int64_t count, const T* y, const T* dy, T* dx) {
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) {
    // dy is loaded whatever the mask says: a select of two loaded values vectorises, a conditional load
    // becomes a branch that mispredicts on half the elements.
    const T g = dy[i];
    dx[i] = y[i] <= T(0) ? T(0) : g;  // as PyTorch's threshold_backward
  }
}

template void relu_forward<float>(std::int64_t, const float*, float*);
template void relu_forward<double>(std::int64_t, const double*, double*);
template void relu_backward<float>(std::int64_t, const float*, const float*, float*);
template void relu_backward<double>(std::int64_t, const double*, const double*, double*);

template <typename T>
void add(std::int64_t count, const T* a, const T* b, T* y) {
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}

template void add<float>(std::int64_t, const float*, const float*, float*);
template void add<double>(std::int64_t, const double*, const double*, double*);

}  // namespace train::kernels
