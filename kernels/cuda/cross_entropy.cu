// kernels/cuda/cross_entropy.cu: softmax cross-entropy with label smoothing (PyTorch's definition, mean
// over the batch) and its gradient, on the GPU.
//
// One block per sample: the row's max (fp32, exact), then sum exp(z - max) and sum z in fp64 by a
// fixed-order block reduction, lse = max + log(sum), the per-sample loss
//   (1 - eps) * (lse - z_label) + eps * (lse - mean_j z_j),
// and dlogits = (exp(z - lse) - (1 - eps) * onehot - eps / classes) / n. A second single-block kernel
// averages the per-sample losses in fixed order into the device scalar. Nothing is copied to the host.

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

#include <stdexcept>

namespace train::kernels::cuda {
namespace {

using device::from_float;
using device::to_float;

constexpr int kThreads = 256;

template <typename T>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_rows(int n, int classes, const T* logits, const std::int32_t* labels, float label_smoothing,
                       double* row_loss, T* dlogits) {
  const int i = blockIdx.x;
  const T* z = logits + static_cast<std::int64_t>(i) * classes;
  const int label = labels[i];
  const bool valid = label >= 0 && label < classes;
  // Read before any thread can write dlogits, which may alias logits (the reductions below synchronise
  // the block before the writing loop starts).
  const double z_label = valid ? static_cast<double>(to_float(z[label])) : 0.0;

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < classes; j += kThreads) local_max = fmaxf(local_max, to_float(z[j]));
  const double zmax = device::block_max<kThreads>(local_max);

  double local_exp = 0.0, local_z = 0.0;
  for (int j = threadIdx.x; j < classes; j += kThreads) {
    const double v = to_float(z[j]);
    local_exp += exp(v - zmax);
    local_z += v;
  }
  const double sum_exp = device::block_sum<kThreads>(local_exp);
  const double sum_z = device::block_sum<kThreads>(local_z);
  const double lse = zmax + log(sum_exp);
  const double eps = label_smoothing;
  if (threadIdx.x == 0) {
    row_loss[i] = valid ? (1.0 - eps) * (lse - z_label) + eps * (lse - sum_z / classes) : nan("");
  }
  if (dlogits == nullptr) return;
  T* d = dlogits + static_cast<std::int64_t>(i) * classes;
  const double smooth = eps / classes;
  const double inv_n = 1.0 / n;
  for (int j = threadIdx.x; j < classes; j += kThreads) {
    const double p = exp(static_cast<double>(to_float(z[j])) - lse);
    const double target = (j == label ? 1.0 - eps : 0.0) + smooth;
    // An invalid label poisons the row's gradient as well as its loss.
    d[j] = from_float<T>(valid ? static_cast<float>((p - target) * inv_n) : nanf(""));
  }
}

__global__ void __launch_bounds__(kThreads) mean_loss(int n, const double* row_loss, float* loss) {
  double local = 0.0;
  for (int i = threadIdx.x; i < n; i += kThreads) local += row_loss[i];
  const double total = device::block_sum<kThreads>(local);
  if (threadIdx.x == 0) *loss = static_cast<float>(total / n);
}

}  // namespace

template <typename T>
void softmax_cross_entropy(Context& context, int n, int classes, const T* logits, const std::int32_t* labels,
                           float label_smoothing, float* loss, T* dlogits) {
  if (n <= 0 || classes <= 0) throw std::invalid_argument("softmax_cross_entropy: expected positive sizes");
  auto* row_loss = static_cast<double*>(context.workspace(sizeof(double) * static_cast<std::size_t>(n)));
  cross_entropy_rows<T><<<n, kThreads, 0, context.stream()>>>(n, classes, logits, labels, label_smoothing, row_loss,
                                                               dlogits);
  TRAIN_CUDA_CHECK_LAUNCH();
  mean_loss<<<1, kThreads, 0, context.stream()>>>(n, row_loss, loss);
  TRAIN_CUDA_CHECK_LAUNCH();
}

template void softmax_cross_entropy<float>(Context&, int, int, const float*, const std::int32_t*, float, float*,
                                           float*);
template void softmax_cross_entropy<bf16>(Context&, int, int, const bf16*, const std::int32_t*, float, float*, bf16*);

}  // namespace train::kernels::cuda
