// kernels/cpu/optimizer.cpp: one optimizer step over every parameter tensor: SGD with momentum
// (torch.optim.SGD's arithmetic, Nesterov optional), weight decay per tensor, LARS trust ratios.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <cmath>

namespace train::ops {
template <typename T>
double lars_trust_ratio(const SgdTensor<T>& tensor, const SgdOptions& options) {
  if (!options.lars || !tensor.weight_decay || tensor.count <= 0) return 1.0;
  double squares[2];  // sum param^2, sum grad^2
  cpu::blocked_column_sums(
      tensor.count, 2,
      [&](std::int64_t r0, std::int64_t r1, double* acc) {
        for (std::int64_t i = r0; i < r1; ++i) {
          const double p = static_cast<double>(tensor.param[i]);
          const double g = static_cast<double>(tensor.grad[i]);
          acc[0] += p * p;
          acc[1] += g * g;
        }
      },
      squares);
  const double param_norm = std::sqrt(squares[0]);
  const double grad_norm = std::sqrt(squares[1]);
  if (param_norm == 0.0 || grad_norm == 0.0) return 1.0;
  return options.lars_eta * param_norm /
         (grad_norm + options.weight_decay * param_norm + options.lars_epsilon);
}

template <typename T>
void sgd_step(std::span<const SgdTensor<T>> tensors, const SgdOptions& options) {
  const T lr = static_cast<T>(options.lr);
  const T momentum = static_cast<T>(options.momentum);
  const bool nesterov = options.nesterov;
  for (const SgdTensor<T>& t : tensors) {
    const T wd = t.weight_decay ? static_cast<T>(options.weight_decay) : T(0);
    const bool scaled = options.lars && t.weight_decay;
    const T trust = static_cast<T>(lars_trust_ratio(t, options));  // norms before this tensor's update
    T* param = t.param;
    const T* grad = t.grad;
    T* buf = t.momentum_buffer;
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(t.count))
    for (std::int64_t i = 0; i < t.count; ++i) {
      T g = grad[i];
      if (wd != T(0)) g = g + wd * param[i];
      if (scaled) g = g * trust;
      if (momentum != T(0)) {
        const T b = momentum * buf[i] + g;
        buf[i] = b;
        g = nesterov ? g + momentum * b : b;
      }
      param[i] = param[i] - lr * g;
    }
  }
}

template double lars_trust_ratio<float>(const SgdTensor<float>&, const SgdOptions&);
template double lars_trust_ratio<double>(const SgdTensor<double>&, const SgdOptions&);
template void sgd_step<float>(std::span<const SgdTensor<float>>, const SgdOptions&);
template void sgd_step<double>(std::span<const SgdTensor<double>>, const SgdOptions&);

}  // namespace train::ops
