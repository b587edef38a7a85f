// kernels/cpu/batch_norm.cpp: batch normalisation over NHWC rows x channels: training-mode forward with
// the running-statistics update, its backward, and inference mode.
//
// Statistics are two passes in double (mean, then the mean of squared deviations), each a sum over
// fixed blocks of rows combined in block order (cpu::blocked_column_sums), so they do not depend on the
// thread count. The elementwise passes run over rows in parallel with channels contiguous.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace train::ops {
namespace {

// y[r][c] = (x[r][c] - center[c]) * scale[c] + shift[c] in T (subtracting first keeps a large mean from
// costing precision).
template <typename T>
void normalize(std::int64_t rows, int channels, const T* x, const T* center, const T* scale, const T* shift, T* y) {
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(rows * channels))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * channels;
    T* yr = y + r * channels;
    for (int c = 0; c < channels; ++c) yr[c] = (xr[c] - center[c]) * scale[c] + shift[c];
  }
}

}  // namespace

template <typename T>
void batch_norm_forward_train(std::int64_t rows, int channels, const T* x, const T* gamma, const T* beta, T eps,
                              T momentum, T* running_mean, T* running_var, T* y, T* save_mean, T* save_invstd) {
  if (rows < 2 || channels <= 0) {
    throw std::invalid_argument("batch_norm_forward_train: expected at least 2 values per channel and a positive "
                                "channel count, got " + std::to_string(rows) + " rows, " +
                                std::to_string(channels) + " channels");
  }
  const int cn = channels;
  std::vector<double> mean(cn), var(cn);
  cpu::blocked_column_sums(
      rows, cn,
      [&](std::int64_t r0, std::int64_t r1, double* acc) {
        for (std::int64_t r = r0; r < r1; ++r) {
          const T* xr = x + r * cn;
          for (int c = 0; c < cn; ++c) acc[c] += static_cast<double>(xr[c]);
        }
      },
      mean.data());
  for (int c = 0; c < cn; ++c) mean[c] /= static_cast<double>(rows);
  cpu::blocked_column_sums(
      rows, cn,
      [&](std::int64_t r0, std::int64_t r1, double* acc) {
        const double* m = mean.data();
        for (std::int64_t r = r0; r < r1; ++r) {
          const T* xr = x + r * cn;
          for (int c = 0; c < cn; ++c) {
            const double d = static_cast<double>(xr[c]) - m[c];
            acc[c] += d * d;
          }
        }
      },
      var.data());
  std::vector<T> center(cn), scale(cn);
  for (int c = 0; c < cn; ++c) {
    var[c] /= static_cast<double>(rows);  // biased: what normalises
    const double invstd = 1.0 / std::sqrt(var[c] + static_cast<double>(eps));
    save_mean[c] = static_cast<T>(mean[c]);
    save_invstd[c] = static_cast<T>(invstd);
    center[c] = static_cast<T>(mean[c]);
    scale[c] = static_cast<T>(static_cast<double>(gamma[c]) * invstd);
    if (running_mean != nullptr && running_var != nullptr) {
      const double m = static_cast<double>(momentum);
      const double unbiased = var[c] * static_cast<double>(rows) / static_cast<double>(rows - 1);
      running_mean[c] = static_cast<T>((1.0 - m) * static_cast<double>(running_mean[c]) + m * mean[c]);
      running_var[c] = static_cast<T>((1.0 - m) * static_cast<double>(running_var[c]) + m * unbiased);
    }
  }
  normalize(rows, cn, x, center.data(), scale.data(), beta, y);
}

template <typename T>
void batch_norm_backward(std::int64_t rows, int channels, const T* x, const T* dy, const T* gamma,
                         const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta) {
  if (rows < 1 || channels <= 0) throw std::invalid_argument("batch_norm_backward: expected positive sizes");
  const int cn = channels;
  // sums[0, C) = sum dy, sums[C, 2C) = sum dy * (x - mean); the latter times invstd is dgamma.
  std::vector<double> sums(2 * static_cast<std::size_t>(cn));
  cpu::blocked_column_sums(
      rows, 2 * cn,
      [&](std::int64_t r0, std::int64_t r1, double* acc) {
        double* acc_dy = acc;
        double* acc_dyx = acc + cn;
        for (std::int64_t r = r0; r < r1; ++r) {
          const T* xr = x + r * cn;
          const T* dyr = dy + r * cn;
          for (int c = 0; c < cn; ++c) {
            const double g = static_cast<double>(dyr[c]);
            acc_dy[c] += g;
            acc_dyx[c] += g * (static_cast<double>(xr[c]) - static_cast<double>(save_mean[c]));
          }
        }
      },
      sums.data());
  // dx = k_dy * dy + k_x * (x - mean) + k_0, per channel:
  //   k_dy = gamma * invstd, k_x = -gamma * invstd^2 * dgamma / rows, k_0 = -gamma * invstd * dbeta / rows
  std::vector<T> k_dy(cn), k_x(cn), k_0(cn);
  const double inv_rows = 1.0 / static_cast<double>(rows);
  for (int c = 0; c < cn; ++c) {
    const double invstd = static_cast<double>(save_invstd[c]);
    const double db = sums[c];
    const double dg = sums[cn + c] * invstd;
    dbeta[c] = static_cast<T>(db);
    dgamma[c] = static_cast<T>(dg);
    const double gi = static_cast<double>(gamma[c]) * invstd;
    k_dy[c] = static_cast<T>(gi);
    k_x[c] = static_cast<T>(-gi * invstd * dg * inv_rows);
    k_0[c] = static_cast<T>(-gi * db * inv_rows);
  }
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(rows * cn))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * cn;
    const T* dyr = dy + r * cn;
    T* dxr = dx + r * cn;
    for (int c = 0; c < cn; ++c) dxr[c] = k_dy[c] * dyr[c] + k_x[c] * (xr[c] - save_mean[c]) + k_0[c];
  }
}

template <typename T>
void batch_norm_forward_inference(std::int64_t rows, int channels, const T* x, const T* gamma, const T* beta,
                                  const T* running_mean, const T* running_var, T eps, T* y) {
  if (rows < 0 || channels <= 0) throw std::invalid_argument("batch_norm_forward_inference: bad sizes");
  std::vector<T> scale(channels);
  for (int c = 0; c < channels; ++c) {
    scale[c] = static_cast<T>(static_cast<double>(gamma[c]) /
                              std::sqrt(static_cast<double>(running_var[c]) + static_cast<double>(eps)));
  }
  normalize(rows, channels, x, running_mean, scale.data(), beta, y);
}

#define TRAIN_INSTANTIATE(T)                                                                                    \
  template void batch_norm_forward_train<T>(std::int64_t, int, const T*, const T*, const T*, T, T, T*, T*, T*, \
                                            T*, T*);                                                            \
  template void batch_norm_backward<T>(std::int64_t, int, const T*, const T*, const T*, const T*, const T*, T*, \
                                       T*, T*);                                                                 \
  template void batch_norm_forward_inference<T>(std::int64_t, int, const T*, const T*, const T*, const T*,     \
                                                const T*, T, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(double)
#undef TRAIN_INSTANTIATE

}  // namespace train::ops
