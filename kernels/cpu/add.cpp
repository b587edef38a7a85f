// kernels/cpu/add.cpp: elementwise sum, the residual add (its backward is the identity on both inputs,
// which needs no kernel) and the junction where two gradient flows meet.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

namespace train::kernels {

template <typename T>
void add(std::int64_t count, const T* a, const T* b, T* y) {
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(count))
  for (std::int64_t i = 0; i < count; ++i) y[i] = a[i] + b[i];
}

template void add<float>(std::int64_t, const float*, const float*, float*);
template void add<double>(std::int64_t, const double*, const double*, double*);

}  // namespace train::kernels
