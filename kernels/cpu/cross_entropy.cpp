// kernels/cpu/cross_entropy.cpp: softmax cross-entropy with label smoothing (PyTorch's definition),
// mean over the batch, and its gradient with respect to the logits.
//
// With lse = log sum_j exp(z_j): -log p_j = lse - z_j, so per row
//   loss_i = (1 - eps) * (lse - z_label) + eps * (lse - mean_j z_j)
//   d loss_i / d z_j = p_j - (1 - eps) * [j == label] - eps / classes.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace train::kernels {

template <typename T>
double softmax_cross_entropy(int n, int classes, const T* logits, const std::int32_t* labels, T label_smoothing,
                             T* dlogits) {
  if (n <= 0 || classes <= 0) throw std::invalid_argument("softmax_cross_entropy: expected positive sizes");
  for (int i = 0; i < n; ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      throw std::invalid_argument("softmax_cross_entropy: label " + std::to_string(labels[i]) + " of sample " +
                                  std::to_string(i) + " is outside [0, " + std::to_string(classes) + ")");
    }
  }
  const double eps = static_cast<double>(label_smoothing);
  const double inv_n = 1.0 / n;
  std::vector<double> row_loss(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(std::int64_t{n} * classes * 8))
  for (int i = 0; i < n; ++i) {
    const T* z = logits + std::int64_t{i} * classes;
    double zmax = -INFINITY;
    for (int j = 0; j < classes; ++j) zmax = std::fmax(zmax, static_cast<double>(z[j]));
    double sum_exp = 0.0, sum_z = 0.0;
    for (int j = 0; j < classes; ++j) {
      sum_exp += std::exp(static_cast<double>(z[j]) - zmax);
      sum_z += static_cast<double>(z[j]);
    }
    const double lse = zmax + std::log(sum_exp);
    const int label = labels[i];
    row_loss[i] = (1.0 - eps) * (lse - static_cast<double>(z[label])) + eps * (lse - sum_z / classes);
    if (dlogits != nullptr) {
      T* d = dlogits + std::int64_t{i} * classes;
      const double smooth = eps / classes;
      for (int j = 0; j < classes; ++j) {
        const double p = std::exp(static_cast<double>(z[j]) - lse);
        const double target = (j == label ? 1.0 - eps : 0.0) + smooth;
        d[j] = static_cast<T>((p - target) * inv_n);
      }
    }
  }
  double loss = 0.0;
  for (int i = 0; i < n; ++i) loss += row_loss[i];
  return loss * inv_n;
}

template double softmax_cross_entropy<float>(int, int, const float*, const std::int32_t*, float, float*);
template double softmax_cross_entropy<double>(int, int, const double*, const std::int32_t*, double, double*);

}  // namespace train::kernels
