// kernels/cpu/optimizer.cpp: one optimizer step over every parameter tensor: SGD with momentum
// (torch.optim.SGD's arithmetic, Nesterov optional), weight decay per tensor, LARS trust ratios.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace train::kernels {
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
  // Every trust ratio first: each reads only its own tensor, so taking them all before any update is the
  // same as taking each just before its tensor's update.
  std::vector<T> trust(tensors.size());
  std::vector<std::int64_t> first(tensors.size() + 1, 0);  // tensor i is elements [first[i], first[i+1])
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    trust[i] = static_cast<T>(lars_trust_ratio(tensors[i], options));
    first[i + 1] = first[i] + std::max<std::int64_t>(0, tensors[i].count);
  }
  const std::int64_t total = first.back();
  // One parallel region for all tensors (not one per tensor): each thread takes an equal share of the
  // concatenated elements. The update is elementwise, so the share boundaries change nothing.
#pragma omp parallel if (cpu::parallel_worth(total))
  {
    const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t begin = total * t / threads, end = total * (t + 1) / threads;
    std::size_t i = static_cast<std::size_t>(std::upper_bound(first.begin(), first.end(), begin) - first.begin()) - 1;
    for (; i < tensors.size() && first[i] < end; ++i) {
      const SgdTensor<T>& tensor = tensors[i];
      const T wd = tensor.weight_decay ? static_cast<T>(options.weight_decay) : T(0);
      const bool scaled = options.lars && tensor.weight_decay;
      T* param = tensor.param;
      const T* grad = tensor.grad;
      T* buf = tensor.momentum_buffer;
      const std::int64_t e0 = std::max(begin, first[i]) - first[i], e1 = std::min(end, first[i + 1]) - first[i];
      for (std::int64_t e = e0; e < e1; ++e) {
        T g = grad[e];
        if (wd != T(0)) g = g + wd * param[e];
        if (scaled) g = g * trust[i];
        if (momentum != T(0)) {
          const T b = momentum * buf[e] + g;
          buf[e] = b;
          g = nesterov ? g + momentum * b : b;
        }
        param[e] = param[e] - lr * g;
      }
    }
  }
}

template double lars_trust_ratio<float>(const SgdTensor<float>&, const SgdOptions&);
template double lars_trust_ratio<double>(const SgdTensor<double>&, const SgdOptions&);
template void sgd_step<float>(std::span<const SgdTensor<float>>, const SgdOptions&);
template void sgd_step<double>(std::span<const SgdTensor<double>>, const SgdOptions&);

}  // namespace train::kernels
