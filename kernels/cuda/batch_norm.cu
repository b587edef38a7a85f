// kernels/cuda/batch_norm.cu: batch normalisation over NHWC rows x channels on the GPU: training
// forward (plain, + ReLU, + residual add + ReLU), backward (plain, through a ReLU), inference.
//
// Each training op is three launches:
//   1. partials: a grid of (32-channel tile) x (row slice) blocks; each sums its slice per channel in
//      fp64 and writes one partial per channel (plan::column_reduction fixes the slices by shape);
//   2. combine: per channel, the partials in slice order -> statistics (or gradient sums), the running
//      statistics update and the per-channel coefficients of the elementwise pass;
//   3. apply: elementwise over all values, 16-byte packs where channels and alignment allow.
// No atomics and a partition fixed by the shape: bit-identical results run to run.
//
// The forward statistics are one pass (sum and sum of squares in fp64; var = E[x^2] - mean^2, which
// fp64 keeps exact enough for activations whose mean is not 10^6 standard deviations from zero), where
// the CPU reference takes two passes; both agree to fp64 rounding before the cast to fp32.

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

#include <stdexcept>
#include <string>

namespace train::kernels::cuda {
namespace {

using device::from_float;
using device::to_float;
using plan::kColumnTile;
using plan::kCombineLanes;
using plan::kRowLanes;

enum class Epilogue { none, relu, add_relu };

// ---- statistics --------------------------------------------------------------------------------------

// Sum over kRowLanes row lanes of shared[lane][threadIdx.x], in lane order (fixed).
template <int kLanes>
__device__ double sum_lanes(const double (&shared)[kLanes][kColumnTile]) {
  double total = 0.0;
#pragma unroll
  for (int lane = 0; lane < kLanes; ++lane) total += shared[lane][threadIdx.x];
  return total;
}

template <typename T>
__global__ void __launch_bounds__(kColumnTile* kRowLanes)
    forward_partials(std::int64_t rows, int channels, const T* x, std::int64_t rows_per_slice, double* partial_sum,
                     double* partial_squares) {
  const int c = blockIdx.x * kColumnTile + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_slice;
  const std::int64_t r1 = min(rows, r0 + rows_per_slice);
  double sum = 0.0, squares = 0.0;
  if (c < channels) {
#pragma unroll 4
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const double v = to_float(x[r * channels + c]);
      sum += v;
      squares += v * v;
    }
  }
  __shared__ double shared_sum[kRowLanes][kColumnTile];
  __shared__ double shared_squares[kRowLanes][kColumnTile];
  shared_sum[threadIdx.y][threadIdx.x] = sum;
  shared_squares[threadIdx.y][threadIdx.x] = squares;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    const std::int64_t out = static_cast<std::int64_t>(blockIdx.y) * channels + c;
    partial_sum[out] = sum_lanes(shared_sum);
    partial_squares[out] = sum_lanes(shared_squares);
  }
}

// Adds the row_slices partials of channel c (column c of [row_slices][channels]) in slice order over
// kCombineLanes lanes, then the lanes in order. Returns the total in lane 0 (threadIdx.y == 0).
__device__ void combine_two(int row_slices, int channels, int c, const double* a, const double* b, double& total_a,
                            double& total_b) {
  double sa = 0.0, sb = 0.0;
  if (c < channels) {
    for (int slice = threadIdx.y; slice < row_slices; slice += kCombineLanes) {
      sa += a[static_cast<std::int64_t>(slice) * channels + c];
      sb += b[static_cast<std::int64_t>(slice) * channels + c];
    }
  }
  __shared__ double shared_a[kCombineLanes][kColumnTile];
  __shared__ double shared_b[kCombineLanes][kColumnTile];
  shared_a[threadIdx.y][threadIdx.x] = sa;
  shared_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  total_a = sum_lanes(shared_a);
  total_b = sum_lanes(shared_b);
}

__global__ void __launch_bounds__(kColumnTile* kCombineLanes)
    forward_combine(std::int64_t rows, int channels, int row_slices, const double* partial_sum,
                    const double* partial_squares, const float* gamma, float eps, float momentum,
                    float* running_mean, float* running_var, float* save_mean, float* save_invstd, float* scale) {
  const int c = blockIdx.x * kColumnTile + threadIdx.x;
  double sum, squares;
  combine_two(row_slices, channels, c, partial_sum, partial_squares, sum, squares);
  if (threadIdx.y != 0 || c >= channels) return;
  const double n = static_cast<double>(rows);
  const double mean = sum / n;
  const double var = fmax(squares / n - mean * mean, 0.0);  // biased: what normalises
  const double invstd = 1.0 / sqrt(var + static_cast<double>(eps));
  save_mean[c] = static_cast<float>(mean);
  save_invstd[c] = static_cast<float>(invstd);
  scale[c] = static_cast<float>(static_cast<double>(gamma[c]) * invstd);
  if (running_mean != nullptr && running_var != nullptr) {
    const double m = static_cast<double>(momentum);
    const double unbiased = var * n / (n - 1.0);
    running_mean[c] = static_cast<float>((1.0 - m) * static_cast<double>(running_mean[c]) + m * mean);
    running_var[c] = static_cast<float>((1.0 - m) * static_cast<double>(running_var[c]) + m * unbiased);
  }
}

// ---- elementwise normalisation ------------------------------------------------------------------------

// y = epilogue((x - center[c]) * scale[c] + shift[c]) over packs of V values of one row (V divides
// channels). The ReLU is relu_forward's rule: v < 0 ? 0 : v, so NaN passes.
template <typename T, Epilogue epilogue, int V>
__global__ void normalize(std::int64_t packs, int channels, const T* x, const T* shortcut, const float* center,
                          const float* scale, const float* shift, T* y) {
  for (std::int64_t p = device::global_thread(); p < packs; p += device::grid_stride()) {
    const std::int64_t i = p * V;
    const int c = static_cast<int>(i % channels);
    const auto xv = device::load_pack<T, V>(x + i);
    device::Pack<T, V> sv;
    if constexpr (epilogue == Epilogue::add_relu) sv = device::load_pack<T, V>(shortcut + i);
    device::Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float v = (to_float(xv.v[k]) - center[c + k]) * scale[c + k] + shift[c + k];
      if constexpr (epilogue == Epilogue::add_relu) v += to_float(sv.v[k]);
      if constexpr (epilogue != Epilogue::none) v = v < 0.0f ? 0.0f : v;
      out.v[k] = from_float<T>(v);
    }
    device::store_pack<T, V>(y + i, out);
  }
}

template <typename T, Epilogue epilogue>
void launch_normalize(Context& context, std::int64_t rows, int channels, const T* x, const T* shortcut,
                      const float* center, const float* scale, const float* shift, T* y) {
  const std::int64_t count = rows * channels;
  if (count == 0) return;
  constexpr int V = device::kPackWidth<T>;
  const bool packed = channels % V == 0 && aligned_to(x, 16) && aligned_to(y, 16) &&
                      (shortcut == nullptr || aligned_to(shortcut, 16));
  const std::int64_t packs = packed ? count / V : count;
  const int blocks = plan::elementwise_blocks(packs);
  if (packed) {
    normalize<T, epilogue, V><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(
        packs, channels, x, shortcut, center, scale, shift, y);
  } else {
    normalize<T, epilogue, 1><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(
        packs, channels, x, shortcut, center, scale, shift, y);
  }
  TRAIN_CUDA_CHECK_LAUNCH();
}

// ---- backward ------------------------------------------------------------------------------------------

// The gradient reaching batch norm: dy, or dy masked by the following ReLU (relu_backward's rule on y).
template <typename T, bool masked>
__device__ __forceinline__ float incoming_gradient(const T* y, const T* dy, std::int64_t i) {
  const float g = to_float(dy[i]);
  if constexpr (masked) return to_float(y[i]) <= 0.0f ? 0.0f : g;
  return g;
}

template <typename T, bool masked>
__global__ void __launch_bounds__(kColumnTile* kRowLanes)
    backward_partials(std::int64_t rows, int channels, const T* x, const T* y, const T* dy, const float* save_mean,
                      std::int64_t rows_per_slice, double* partial_dy, double* partial_dy_xmu) {
  const int c = blockIdx.x * kColumnTile + threadIdx.x;
  const std::int64_t r0 = static_cast<std::int64_t>(blockIdx.y) * rows_per_slice;
  const std::int64_t r1 = min(rows, r0 + rows_per_slice);
  double sum_dy = 0.0, sum_dy_xmu = 0.0;
  if (c < channels) {
    const double mean = save_mean[c];
#pragma unroll 4
    for (std::int64_t r = r0 + threadIdx.y; r < r1; r += kRowLanes) {
      const std::int64_t i = r * channels + c;
      const double g = incoming_gradient<T, masked>(y, dy, i);
      sum_dy += g;
      sum_dy_xmu += g * (static_cast<double>(to_float(x[i])) - mean);
    }
  }
  __shared__ double shared_dy[kRowLanes][kColumnTile];
  __shared__ double shared_dy_xmu[kRowLanes][kColumnTile];
  shared_dy[threadIdx.y][threadIdx.x] = sum_dy;
  shared_dy_xmu[threadIdx.y][threadIdx.x] = sum_dy_xmu;
  __syncthreads();
  if (threadIdx.y == 0 && c < channels) {
    const std::int64_t out = static_cast<std::int64_t>(blockIdx.y) * channels + c;
    partial_dy[out] = sum_lanes(shared_dy);
    partial_dy_xmu[out] = sum_lanes(shared_dy_xmu);
  }
}

// dbeta = sum dy, dgamma = invstd * sum dy (x - mean); dx = k_dy * dy + k_x * (x - mean) + k_0 with
//   k_dy = gamma * invstd, k_x = -gamma * invstd^2 * dgamma / rows, k_0 = -gamma * invstd * dbeta / rows.
__global__ void __launch_bounds__(kColumnTile* kCombineLanes)
    backward_combine(std::int64_t rows, int channels, int row_slices, const double* partial_dy,
                     const double* partial_dy_xmu, const float* gamma, const float* save_invstd, float* dgamma,
                     float* dbeta, float* k_dy, float* k_x, float* k_0) {
  const int c = blockIdx.x * kColumnTile + threadIdx.x;
  double sum_dy, sum_dy_xmu;
  combine_two(row_slices, channels, c, partial_dy, partial_dy_xmu, sum_dy, sum_dy_xmu);
  if (threadIdx.y != 0 || c >= channels) return;
  const double invstd = save_invstd[c];
  const double db = sum_dy;
  const double dg = sum_dy_xmu * invstd;
  dbeta[c] = static_cast<float>(db);
  dgamma[c] = static_cast<float>(dg);
  const double inv_rows = 1.0 / static_cast<double>(rows);
  const double gi = static_cast<double>(gamma[c]) * invstd;
  k_dy[c] = static_cast<float>(gi);
  k_x[c] = static_cast<float>(-gi * invstd * dg * inv_rows);
  k_0[c] = static_cast<float>(-gi * db * inv_rows);
}

template <typename T, bool masked, int V>
__global__ void backward_apply(std::int64_t packs, int channels, const T* x, const T* y, const T* dy,
                               const float* save_mean, const float* k_dy, const float* k_x, const float* k_0, T* dx) {
  for (std::int64_t p = device::global_thread(); p < packs; p += device::grid_stride()) {
    const std::int64_t i = p * V;
    const int c = static_cast<int>(i % channels);
    const auto xv = device::load_pack<T, V>(x + i);
    const auto dyv = device::load_pack<T, V>(dy + i);
    device::Pack<T, V> yv;
    if constexpr (masked) yv = device::load_pack<T, V>(y + i);
    device::Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      float g = to_float(dyv.v[k]);
      if constexpr (masked) g = to_float(yv.v[k]) <= 0.0f ? 0.0f : g;
      // Each product and sum rounded on its own, in the CPU reference's order, never fused into an FMA:
      // with few rows per channel dx is a near-cancellation (two rows: dx = gamma * invstd * (g1 - g2) / 2
      // * eps / (var + eps)), where an FMA's single rounding and the reference's two differ by 1e-3
      // relative. Identical rounding makes fp32 results equal to the reference's bit for bit.
      const float xmu = __fsub_rn(to_float(xv.v[k]), save_mean[c + k]);
      const float v = __fadd_rn(__fadd_rn(__fmul_rn(k_dy[c + k], g), __fmul_rn(k_x[c + k], xmu)), k_0[c + k]);
      out.v[k] = from_float<T>(v);
    }
    device::store_pack<T, V>(dx + i, out);
  }
}

// ---- inference ------------------------------------------------------------------------------------------

__global__ void inference_scale(int channels, const float* gamma, const float* running_var, float eps, float* scale) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c < channels) {
    scale[c] = static_cast<float>(static_cast<double>(gamma[c]) /
                                  sqrt(static_cast<double>(running_var[c]) + static_cast<double>(eps)));
  }
}

// ---- host side -----------------------------------------------------------------------------------------

void check_sizes(const char* op, std::int64_t rows, int channels, std::int64_t min_rows) {
  if (rows < min_rows || channels <= 0) {
    throw std::invalid_argument(std::string(op) + ": expected at least " + std::to_string(min_rows) +
                                " values per channel and a positive channel count, got " + std::to_string(rows) +
                                " rows, " + std::to_string(channels) + " channels");
  }
}

// The workspace of a training op: two fp64 partial arrays [row_slices][channels], then `float_arrays`
// fp32 arrays [channels], each 256-byte aligned.
struct BnWorkspace {
  double* partial_a;
  double* partial_b;
  float* floats[3];
};
BnWorkspace carve_workspace(Context& context, const plan::ColumnReduction& r, int channels, int float_arrays) {
  const std::size_t partial_bytes =
      plan::align_up(sizeof(double) * static_cast<std::size_t>(r.row_slices) * static_cast<std::size_t>(channels));
  const std::size_t float_bytes = plan::align_up(sizeof(float) * static_cast<std::size_t>(channels));
  auto* base = static_cast<char*>(context.workspace(2 * partial_bytes + float_arrays * float_bytes));
  BnWorkspace w{};
  w.partial_a = reinterpret_cast<double*>(base);
  w.partial_b = reinterpret_cast<double*>(base + partial_bytes);
  for (int i = 0; i < float_arrays; ++i) {
    w.floats[i] = reinterpret_cast<float*>(base + 2 * partial_bytes + i * float_bytes);
  }
  return w;
}

template <typename T>
void forward_train(Context& context, const char* op, Epilogue epilogue, std::int64_t rows, int channels, const T* x,
                   const T* shortcut, const float* gamma, const float* beta, float eps, float momentum,
                   float* running_mean, float* running_var, T* y, float* save_mean, float* save_invstd) {
  check_sizes(op, rows, channels, 2);
  const plan::ColumnReduction r = plan::column_reduction(rows, channels);
  const BnWorkspace w = carve_workspace(context, r, channels, 1);
  float* scale = w.floats[0];
  forward_partials<T><<<dim3(r.channel_tiles, r.row_slices), dim3(kColumnTile, kRowLanes), 0, context.stream()>>>(
      rows, channels, x, r.rows_per_slice, w.partial_a, w.partial_b);
  TRAIN_CUDA_CHECK_LAUNCH();
  forward_combine<<<r.channel_tiles, dim3(kColumnTile, kCombineLanes), 0, context.stream()>>>(
      rows, channels, r.row_slices, w.partial_a, w.partial_b, gamma, eps, momentum, running_mean, running_var,
      save_mean, save_invstd, scale);
  TRAIN_CUDA_CHECK_LAUNCH();
  switch (epilogue) {
    case Epilogue::none:
      launch_normalize<T, Epilogue::none>(context, rows, channels, x, nullptr, save_mean, scale, beta, y);
      break;
    case Epilogue::relu:
      launch_normalize<T, Epilogue::relu>(context, rows, channels, x, nullptr, save_mean, scale, beta, y);
      break;
    case Epilogue::add_relu:
      launch_normalize<T, Epilogue::add_relu>(context, rows, channels, x, shortcut, save_mean, scale, beta, y);
      break;
  }
}

template <typename T, bool masked>
void backward(Context& context, std::int64_t rows, int channels, const T* x, const T* y, const T* dy,
              const float* gamma, const float* save_mean, const float* save_invstd, T* dx, float* dgamma,
              float* dbeta) {
  check_sizes(masked ? "batch_norm_relu_backward" : "batch_norm_backward", rows, channels, 1);
  const plan::ColumnReduction r = plan::column_reduction(rows, channels);
  const BnWorkspace w = carve_workspace(context, r, channels, 3);
  float* k_dy = w.floats[0];
  float* k_x = w.floats[1];
  float* k_0 = w.floats[2];
  backward_partials<T, masked>
      <<<dim3(r.channel_tiles, r.row_slices), dim3(kColumnTile, kRowLanes), 0, context.stream()>>>(
          rows, channels, x, y, dy, save_mean, r.rows_per_slice, w.partial_a, w.partial_b);
  TRAIN_CUDA_CHECK_LAUNCH();
  backward_combine<<<r.channel_tiles, dim3(kColumnTile, kCombineLanes), 0, context.stream()>>>(
      rows, channels, r.row_slices, w.partial_a, w.partial_b, gamma, save_invstd, dgamma, dbeta, k_dy, k_x, k_0);
  TRAIN_CUDA_CHECK_LAUNCH();
  // dx may alias dy: every value of dy is read by the thread that writes the same position of dx, and
  // the partials kernel finished reading dy before this launch starts (same stream).
  const std::int64_t count = rows * channels;
  constexpr int V = device::kPackWidth<T>;
  const bool packed = channels % V == 0 && aligned_to(x, 16) && aligned_to(dy, 16) && aligned_to(dx, 16) &&
                      (!masked || aligned_to(y, 16));
  const std::int64_t packs = packed ? count / V : count;
  const int blocks = plan::elementwise_blocks(packs);
  if (packed) {
    backward_apply<T, masked, V><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(
        packs, channels, x, y, dy, save_mean, k_dy, k_x, k_0, dx);
  } else {
    backward_apply<T, masked, 1><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(
        packs, channels, x, y, dy, save_mean, k_dy, k_x, k_0, dx);
  }
  TRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T>
void batch_norm_forward_train(Context& context, std::int64_t rows, int channels, const T* x, const float* gamma,
                              const float* beta, float eps, float momentum, float* running_mean,
                              float* running_var, T* y, float* save_mean, float* save_invstd) {
  forward_train<T>(context, "batch_norm_forward_train", Epilogue::none, rows, channels, x, nullptr, gamma, beta, eps,
                   momentum, running_mean, running_var, y, save_mean, save_invstd);
}

template <typename T>
void batch_norm_relu_forward_train(Context& context, std::int64_t rows, int channels, const T* x, const T* shortcut,
                                   const float* gamma, const float* beta, float eps, float momentum,
                                   float* running_mean, float* running_var, T* y, float* save_mean,
                                   float* save_invstd) {
  forward_train<T>(context, "batch_norm_relu_forward_train",
                   shortcut == nullptr ? Epilogue::relu : Epilogue::add_relu, rows, channels, x, shortcut, gamma,
                   beta, eps, momentum, running_mean, running_var, y, save_mean, save_invstd);
}

template <typename T>
void batch_norm_backward(Context& context, std::int64_t rows, int channels, const T* x, const T* dy,
                         const float* gamma, const float* save_mean, const float* save_invstd, T* dx, float* dgamma,
                         float* dbeta) {
  backward<T, false>(context, rows, channels, x, nullptr, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

template <typename T>
void batch_norm_relu_backward(Context& context, std::int64_t rows, int channels, const T* x, const T* y, const T* dy,
                              const float* gamma, const float* save_mean, const float* save_invstd, T* dx,
                              float* dgamma, float* dbeta) {
  backward<T, true>(context, rows, channels, x, y, dy, gamma, save_mean, save_invstd, dx, dgamma, dbeta);
}

template <typename T>
void batch_norm_forward_inference(Context& context, std::int64_t rows, int channels, const T* x, const float* gamma,
                                  const float* beta, const float* running_mean, const float* running_var, float eps,
                                  T* y) {
  check_sizes("batch_norm_forward_inference", rows, channels, 0);
  auto* scale = static_cast<float*>(context.workspace(sizeof(float) * static_cast<std::size_t>(channels)));
  inference_scale<<<static_cast<int>(plan::ceil_div(channels, 256)), 256, 0, context.stream()>>>(
      channels, gamma, running_var, eps, scale);
  TRAIN_CUDA_CHECK_LAUNCH();
  // y may alias x: elementwise, each value read and written by one thread.
  launch_normalize<T, Epilogue::none>(context, rows, channels, x, nullptr, running_mean, scale, beta, y);
}

#define TRAIN_INSTANTIATE(T)                                                                                       \
  template void batch_norm_forward_train<T>(Context&, std::int64_t, int, const T*, const float*, const float*,     \
                                            float, float, float*, float*, T*, float*, float*);                     \
  template void batch_norm_relu_forward_train<T>(Context&, std::int64_t, int, const T*, const T*, const float*,    \
                                                 const float*, float, float, float*, float*, T*, float*, float*);  \
  template void batch_norm_backward<T>(Context&, std::int64_t, int, const T*, const T*, const float*,              \
                                       const float*, const float*, T*, float*, float*);                           \
  template void batch_norm_relu_backward<T>(Context&, std::int64_t, int, const T*, const T*, const T*,             \
                                            const float*, const float*, const float*, T*, float*, float*);        \
  template void batch_norm_forward_inference<T>(Context&, std::int64_t, int, const T*, const float*, const float*, \
                                                const float*, const float*, float, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(bf16)
#undef TRAIN_INSTANTIATE

}  // namespace train::kernels::cuda
