// kernels/cpu/batch_norm.cpp: batch normalisation over NHWC rows x channels: training-mode forward with
// the running-statistics update, its backward, and inference mode.
//
// Statistics are two passes in double (mean, then the mean of squared deviations), each a sum over
// fixed blocks of rows combined in block order (cpu::blocked_column_sums), so they do not depend on the
// thread count. The elementwise passes run over rows in parallel with channels contiguous.
//
// Compiled with -ffp-contract=off (kernels/CMakeLists.txt): every product and sum is rounded on its own, as
// the CUDA twins round them where it matters (the backward's dx, a near-cancellation with few rows).
//
// The fused variants (ReLU after the normalisation, optionally after a residual add; the ReLU mask in the
// backward pass) do the very operations of the unfused sequence in the same order, in one pass over memory
// instead of two or three, so they are bit-identical to it.

#include "kernels/cpu/internal.h"
#include "kernels/ops.h"

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

namespace train::kernels {
namespace {

// What follows the normalisation in the same pass.
enum class Epilogue { none, relu, add_relu };

// y[r][c] = (x[r][c] - center[c]) * scale[c] + shift[c] in T (subtracting first keeps a large mean from
// costing precision), then the epilogue: relu(y), or relu(y + shortcut[r][c]).
template <typename T, Epilogue epilogue>
void normalize(std::int64_t rows, int channels, const T* x, const T* center, const T* scale, const T* shift,
               const T* shortcut, T* y) {
#pragma omp parallel for schedule(static) if (cpu::parallel_worth(rows * channels))
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * channels;
    T* yr = y + r * channels;
    if constexpr (epilogue == Epilogue::none) {
      for (int c = 0; c < channels; ++c) yr[c] = (xr[c] - center[c]) * scale[c] + shift[c];
    } else if constexpr (epilogue == Epilogue::relu) {
      for (int c = 0; c < channels; ++c) {
        const T v = (xr[c] - center[c]) * scale[c] + shift[c];
        yr[c] = v < T(0) ? T(0) : v;  // relu_forward's rule: NaN passes
      }
    } else {
      const T* sr = shortcut + r * channels;
      for (int c = 0; c < channels; ++c) {
        const T v = (xr[c] - center[c]) * scale[c] + shift[c] + sr[c];
        yr[c] = v < T(0) ? T(0) : v;
      }
    }
  }
}

template <typename T>
void normalize_with(Epilogue epilogue, std::int64_t rows, int channels, const T* x, const T* center, const T* scale,
                    const T* shift, const T* shortcut, T* y) {
  switch (epilogue) {
    case Epilogue::none: normalize<T, Epilogue::none>(rows, channels, x, center, scale, shift, shortcut, y); break;
    case Epilogue::relu: normalize<T, Epilogue::relu>(rows, channels, x, center, scale, shift, shortcut, y); break;
    case Epilogue::add_relu:
      normalize<T, Epilogue::add_relu>(rows, channels, x, center, scale, shift, shortcut, y);
      break;
  }
}

// The training-mode forward of every variant: statistics, running statistics, normalisation + epilogue.
template <typename T>
void forward_train(const char* op, Epilogue epilogue, std::int64_t rows, int channels, const T* x, const T* shortcut,
                   const T* gamma, const T* beta, T eps, T momentum, T* running_mean, T* running_var, T* y,
                   T* save_mean, T* save_invstd) {
  if (rows < 2 || channels <= 0) {
    throw std::invalid_argument(std::string(op) + ": expected at least 2 values per channel and a positive "
                                "channel count, got " + std::to_string(rows) + " rows, " +
                                std::to_string(channels) + " channels");
  }
  const int cn = channels;
  std::vector<double> mean(cn), var(cn);
  cpu::column_sums(rows, cn, x, mean.data());
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
  normalize_with(epilogue, rows, cn, x, center.data(), scale.data(), beta, shortcut, y);
}

// The backward of batch norm, of the loss gradient masked by a following ReLU when y (the ReLU's output)
// is given: g = y <= 0 ? 0 : dy, exactly relu_backward's values, never stored.
template <typename T, bool masked>
void backward(std::int64_t rows, int channels, const T* x, const T* y, const T* dy, const T* gamma,
              const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta) {
  if (rows < 1 || channels <= 0) throw std::invalid_argument("batch_norm_backward: expected positive sizes");
  const int cn = channels;
  // The gradient at row r, channel c. dy is loaded whatever the mask says: a select of two loaded values
  // vectorises, a conditional load does not.
  auto gradient = [](const T* dyr, const T* yr, int c) {
    const T g = dyr[c];
    if constexpr (masked) return yr[c] <= T(0) ? T(0) : g;
    return g;
  };
  // sums[0, C) = sum dy, sums[C, 2C) = sum dy * (x - mean); the latter times invstd is dgamma.
  std::vector<double> sums(2 * static_cast<std::size_t>(cn));
  cpu::blocked_column_sums(
      rows, 2 * cn,
      [&](std::int64_t r0, std::int64_t r1, double* acc) {
        double* acc_dy = acc;
        double* acc_dyx = acc + cn;
        // The masked gradient of a row goes through a small buffer: as a store, the select vectorises
        // (relu_backward's loop); as a value feeding double sums, the compiler turns it into a branch.
        std::vector<T> masked_row(masked ? static_cast<std::size_t>(cn) : 0);
        for (std::int64_t r = r0; r < r1; ++r) {
          const T* xr = x + r * cn;
          const T* dyr = dy + r * cn;
          if constexpr (masked) {
            const T* yr = y + r * cn;
            for (int c = 0; c < cn; ++c) masked_row[static_cast<std::size_t>(c)] = gradient(dyr, yr, c);
            dyr = masked_row.data();
          }
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
    const T* yr = masked ? y + r * cn : nullptr;
    T* dxr = dx + r * cn;
    for (int c = 0; c < cn; ++c) dxr[c] = k_dy[c] * gradient(dyr, yr, c) + k_x[c] * (xr[c] - save_mean[c]) + k_0[c];
  }
}

}  // namespace

template <typename T>
void batch_norm_forward_train(std::int64_t rows, int channels, const T* x, const T* gamma, const T* beta, T eps,
                              T momentum, T* running_mean, T* running_var, T* y, T* save_mean, T* save_invstd) {
  forward_train<T>("batch_norm_forward_train", Epilogue::none, rows, channels, x, nullptr, gamma, beta, eps, momentum,
                   running_mean, running_var, y, save_mean, save_invstd);
}

template <typename T>
void batch_norm_relu_forward_train(std::int64_t rows, int channels, const T* x, const T* shortcut, const T* gamma,
                                   const T* beta, T eps, T momentum, T* running_mean, T* running_var, T* y,
                                   T* save_mean, T* save_invstd) {
  forward_train<T>("batch_norm_relu_forward_train", shortcut == nullptr ? Epilogue::relu : Epilogue::add_relu, rows,
                   channels, x, shortcut, gamma, beta, eps, momentum, running_mean, running_var, y, save_mean,
                   save_invstd);
}

template <typename T>
void batch_norm_backward(std::int64_t rows, int channels, const T* x, const T* dy, const T* gamma,
                         const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta) {
  backward<T, false>(rows, channels, x, nullptr, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

template <typename T>
void batch_norm_relu_backward(std::int64_t rows, int channels, const T* x, const T* y, const T* dy, const T* gamma,
                              const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta) {
  backward<T, true>(rows, channels, x, y, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
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
  normalize<T, Epilogue::none>(rows, channels, x, running_mean, scale.data(), beta, nullptr, y);
}

#define TRAIN_INSTANTIATE(T)                                                                                    \
  template void batch_norm_forward_train<T>(std::int64_t, int, const T*, const T*, const T*, T, T, T*, T*, T*, \
                                            T*, T*);                                                            \
  template void batch_norm_backward<T>(std::int64_t, int, const T*, const T*, const T*, const T*, const T*, T*, \
                                       T*, T*);                                                                 \
  template void batch_norm_relu_forward_train<T>(std::int64_t, int, const T*, const T*, const T*, const T*, T, T, \
                                                 T*, T*, T*, T*, T*);                                           \
  template void batch_norm_relu_backward<T>(std::int64_t, int, const T*, const T*, const T*, const T*, const T*,  \
                                            const T*, T*, T*, T*);                                              \
  template void batch_norm_forward_inference<T>(std::int64_t, int, const T*, const T*, const T*, const T*,     \
                                                const T*, T, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(double)
#undef TRAIN_INSTANTIATE

}  // namespace train::kernels
