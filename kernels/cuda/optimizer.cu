// kernels/cuda/optimizer.cu: the optimizer step over all parameter tensors at once: SGD with momentum
// (Nesterov optional), per-tensor weight decay, LARS trust ratios; fp32 master weights, gradients and
// momentum, optionally writing a bf16 (or fp32) copy of the updated weights.
//
// Multi-tensor: the table holds, in device memory, one descriptor per tensor and a list of chunks
// (plan::kOptimizerChunk elements of one tensor each). One block per chunk, so every launch covers all
// tensors with even work per block, whatever their number and sizes.
//
// LARS needs each tensor's ||param|| and ||grad|| before its update: a segmented reduction in two
// launches, (1) per chunk, a fixed-order block sum of p^2 and g^2 in fp64, (2) per tensor, its chunks'
// sums in chunk order -> trust ratio. Then (3) the update. No atomics: bit-identical run to run.
//
// The update is the CPU reference's fp32 arithmetic step for step, with explicitly rounded operations
// (__fmul_rn/__fadd_rn: no fused multiply-adds), so in fp32 the result equals sgd_step<float> up to the
// last bit of the trust ratio.

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace train::kernels::cuda {
namespace {

using device::from_float;
using plan::kOptimizerChunk;
using plan::kOptimizerThreads;
using plan::OptimizerChunk;

template <typename G>
struct DeviceSgdTensor {
  float* param;
  const float* grad;
  float* momentum_buffer;
  G* param_copy;
  std::int64_t count;
  std::int64_t first_chunk;
  std::int64_t chunk_count;
  std::int32_t weight_decay;
  std::int32_t unused;
};

template <typename G>
__global__ void __launch_bounds__(kOptimizerThreads)
    lars_norm_partials(const DeviceSgdTensor<G>* tensors, const OptimizerChunk* chunks, double* partials) {
  const OptimizerChunk chunk = chunks[blockIdx.x];
  const DeviceSgdTensor<G> t = tensors[chunk.tensor];
  double param_squares = 0.0, grad_squares = 0.0;
  if (t.weight_decay != 0) {  // the same for the whole block: no divergence around block_sum
    const std::int64_t end = min(t.count, chunk.begin + kOptimizerChunk);
    for (std::int64_t e = chunk.begin + threadIdx.x; e < end; e += kOptimizerThreads) {
      const double p = t.param[e];
      const double g = t.grad[e];
      param_squares += p * p;
      grad_squares += g * g;
    }
  }
  param_squares = device::block_sum<kOptimizerThreads>(param_squares);
  grad_squares = device::block_sum<kOptimizerThreads>(grad_squares);
  if (threadIdx.x == 0) {
    partials[2 * static_cast<std::int64_t>(blockIdx.x)] = param_squares;
    partials[2 * static_cast<std::int64_t>(blockIdx.x) + 1] = grad_squares;
  }
}

// trust = eta * ||p|| / (||g|| + weight_decay * ||p|| + epsilon), 1 when either norm is 0 or the tensor
// takes no weight decay (train::kernels::lars_trust_ratio).
template <typename G>
__global__ void lars_trust(int tensor_count, const DeviceSgdTensor<G>* tensors, const double* partials, double eta,
                           double weight_decay, double epsilon, float* trust) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= tensor_count) return;
  const DeviceSgdTensor<G> t = tensors[i];
  double ratio = 1.0;
  if (t.weight_decay != 0 && t.count > 0) {
    double param_squares = 0.0, grad_squares = 0.0;
    for (std::int64_t k = t.first_chunk; k < t.first_chunk + t.chunk_count; ++k) {
      param_squares += partials[2 * k];
      grad_squares += partials[2 * k + 1];
    }
    const double param_norm = sqrt(param_squares), grad_norm = sqrt(grad_squares);
    if (param_norm != 0.0 && grad_norm != 0.0) {
      ratio = eta * param_norm / (grad_norm + weight_decay * param_norm + epsilon);
    }
  }
  trust[i] = static_cast<float>(ratio);
}

template <typename G>
__global__ void __launch_bounds__(kOptimizerThreads)
    sgd_update(const DeviceSgdTensor<G>* tensors, const OptimizerChunk* chunks, const float* trust, float lr,
               float momentum, float weight_decay, bool nesterov, bool lars) {
  const OptimizerChunk chunk = chunks[blockIdx.x];
  const DeviceSgdTensor<G> t = tensors[chunk.tensor];
  const float wd = t.weight_decay != 0 ? weight_decay : 0.0f;
  const bool scaled = lars && t.weight_decay != 0;
  const float ratio = scaled ? trust[chunk.tensor] : 1.0f;
  const std::int64_t end = min(t.count, chunk.begin + kOptimizerChunk);
  for (std::int64_t e = chunk.begin + threadIdx.x; e < end; e += kOptimizerThreads) {
    float p = t.param[e];
    float g = t.grad[e];
    if (wd != 0.0f) g = __fadd_rn(g, __fmul_rn(wd, p));
    if (scaled) g = __fmul_rn(g, ratio);
    if (momentum != 0.0f) {
      const float b = __fadd_rn(__fmul_rn(momentum, t.momentum_buffer[e]), g);
      t.momentum_buffer[e] = b;
      g = nesterov ? __fadd_rn(g, __fmul_rn(momentum, b)) : b;
    }
    p = __fsub_rn(p, __fmul_rn(lr, g));
    t.param[e] = p;
    if (t.param_copy != nullptr) t.param_copy[e] = from_float<G>(p);
  }
}

__global__ void fill_ones(int count, float* values) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) values[i] = 1.0f;
}

}  // namespace

template <typename G>
SgdTensorTable<G>::SgdTensorTable(Context& context, std::span<const SgdTensor<G>> tensors) {
  std::vector<std::int64_t> counts;
  counts.reserve(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SgdTensor<G>& t = tensors[i];
    if (t.count > 0 && (t.param == nullptr || t.grad == nullptr)) {
      throw std::invalid_argument("SgdTensorTable: tensor " + std::to_string(i) + " has no param or grad pointer");
    }
    if (t.count > 0 && t.momentum_buffer == nullptr) momentum_buffers_ = false;
    counts.push_back(std::max<std::int64_t>(0, t.count));
  }
  std::vector<plan::TensorChunks> per_tensor;
  const std::vector<OptimizerChunk> chunks = plan::optimizer_chunks(counts, &per_tensor);
  if (tensors.size() > 2147483647u || chunks.size() > 2147483647u) {
    throw std::invalid_argument("SgdTensorTable: too many tensors or chunks");
  }
  std::vector<DeviceSgdTensor<G>> described(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const SgdTensor<G>& t = tensors[i];
    described[i] = DeviceSgdTensor<G>{t.param,
                                      t.grad,
                                      t.momentum_buffer,
                                      t.param_copy,
                                      counts[i],
                                      per_tensor[i].first_chunk,
                                      per_tensor[i].chunk_count,
                                      t.weight_decay ? 1 : 0,
                                      0};
  }
  tensor_count_ = static_cast<int>(tensors.size());
  chunk_count_ = static_cast<int>(chunks.size());
  // Setup time: plain allocations; the copies are ordered on the context's stream (whatever its flags)
  // and waited for, because the host vectors die with this constructor.
  tensors_ = allocate_device(sizeof(DeviceSgdTensor<G>) * std::max<std::size_t>(1, described.size()));
  chunks_ = allocate_device(sizeof(OptimizerChunk) * std::max<std::size_t>(1, chunks.size()));
  norm_partials_ = allocate_device(sizeof(double) * 2 * std::max<std::size_t>(1, chunks.size()));
  trust_ = allocate_device(sizeof(float) * std::max<std::size_t>(1, described.size()));
  if (!described.empty()) {
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(tensors_.get(), described.data(), sizeof(DeviceSgdTensor<G>) * described.size(),
                                     cudaMemcpyHostToDevice, context.stream()));
  }
  if (!chunks.empty()) {
    TRAIN_CUDA_CHECK(cudaMemcpyAsync(chunks_.get(), chunks.data(), sizeof(OptimizerChunk) * chunks.size(),
                                     cudaMemcpyHostToDevice, context.stream()));
  }
  if (tensor_count_ > 0) {
    fill_ones<<<static_cast<int>(plan::ceil_div(tensor_count_, 256)), 256, 0, context.stream()>>>(tensor_count_,
                                                                                                   trust());
    TRAIN_CUDA_CHECK_LAUNCH();
  }
  TRAIN_CUDA_CHECK(cudaStreamSynchronize(context.stream()));
}

template <typename G>
void sgd_step(Context& context, const SgdTensorTable<G>& table, const SgdOptions& options) {
  if (options.momentum != 0.0 && !table.has_momentum_buffers()) {
    throw std::invalid_argument("sgd_step: momentum != 0 but some tensor has no momentum buffer");
  }
  if (table.chunk_count() == 0) return;
  const auto* tensors = static_cast<const DeviceSgdTensor<G>*>(table.device_tensors());
  const auto* chunks = static_cast<const OptimizerChunk*>(table.device_chunks());
  if (options.lars) {
    lars_norm_partials<G><<<table.chunk_count(), kOptimizerThreads, 0, context.stream()>>>(tensors, chunks,
                                                                                           table.norm_partials());
    TRAIN_CUDA_CHECK_LAUNCH();
    lars_trust<G><<<static_cast<int>(plan::ceil_div(table.tensor_count(), 128)), 128, 0, context.stream()>>>(
        table.tensor_count(), tensors, table.norm_partials(), options.lars_eta, options.weight_decay,
        options.lars_epsilon, table.trust());
    TRAIN_CUDA_CHECK_LAUNCH();
  }
  sgd_update<G><<<table.chunk_count(), kOptimizerThreads, 0, context.stream()>>>(
      tensors, chunks, table.trust(), static_cast<float>(options.lr), static_cast<float>(options.momentum),
      static_cast<float>(options.weight_decay), options.nesterov, options.lars);
  TRAIN_CUDA_CHECK_LAUNCH();
}

template class SgdTensorTable<float>;
template class SgdTensorTable<bf16>;
template void sgd_step<float>(Context&, const SgdTensorTable<float>&, const SgdOptions&);
template void sgd_step<bf16>(Context&, const SgdTensorTable<bf16>&, const SgdOptions&);

}  // namespace train::kernels::cuda
