// kernels/cuda/elementwise.cu: ReLU forward/backward, the elementwise sum and dtype casts.
//
// All are memory-bound: each moves 16-byte packs (4 floats / 8 bf16) when every pointer is 16-byte
// aligned and the count divides into packs, and single elements otherwise. Arithmetic in fp32, one
// rounding to T. Aliasing (y = x, dx = dy, y = a or b) is safe: each element is read and then written by
// the same thread.

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

#include <stdexcept>

namespace train::kernels::cuda {
namespace {

using device::from_float;
using device::to_float;

struct ReluForward {
  template <typename T>
  __device__ T operator()(T x) const {
    const float v = to_float(x);
    return v < 0.0f ? from_float<T>(0.0f) : x;  // NaN passes, as torch.relu
  }
};
struct ReluBackward {
  template <typename T>
  __device__ T operator()(T y, T dy) const {
    return to_float(y) <= 0.0f ? from_float<T>(0.0f) : dy;  // as PyTorch's threshold_backward
  }
};
struct Add {
  template <typename T>
  __device__ T operator()(T a, T b) const { return from_float<T>(to_float(a) + to_float(b)); }
};

template <typename T, int V, typename Op>
__global__ void unary_kernel(std::int64_t packs, const T* x, T* y, Op op) {
  for (std::int64_t p = device::global_thread(); p < packs; p += device::grid_stride()) {
    const auto xv = device::load_pack<T, V>(x + p * V);
    device::Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = op(xv.v[k]);
    device::store_pack<T, V>(y + p * V, out);
  }
}

template <typename T, int V, typename Op>
__global__ void binary_kernel(std::int64_t packs, const T* a, const T* b, T* y, Op op) {
  for (std::int64_t p = device::global_thread(); p < packs; p += device::grid_stride()) {
    const auto av = device::load_pack<T, V>(a + p * V);
    const auto bv = device::load_pack<T, V>(b + p * V);
    device::Pack<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) out.v[k] = op(av.v[k], bv.v[k]);
    device::store_pack<T, V>(y + p * V, out);
  }
}

template <typename From, typename To>
__global__ void cast_kernel(std::int64_t count, const From* x, To* y) {
  for (std::int64_t i = device::global_thread(); i < count; i += device::grid_stride()) {
    y[i] = device::from_float<To>(to_float(x[i]));
  }
}

void check_count(const char* op, std::int64_t count) {
  if (count < 0) throw std::invalid_argument(std::string(op) + ": negative count");
}

template <typename T, typename Op>
void launch_unary(Context& context, std::int64_t count, const T* x, T* y, Op op) {
  if (count == 0) return;
  constexpr int V = device::kPackWidth<T>;
  const bool packed = count % V == 0 && aligned_to(x, 16) && aligned_to(y, 16);
  const std::int64_t work = packed ? count / V : count;
  const int blocks = plan::elementwise_blocks(work);
  if (packed) {
    unary_kernel<T, V><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(work, x, y, op);
  } else {
    unary_kernel<T, 1><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(work, x, y, op);
  }
  TRAIN_CUDA_CHECK_LAUNCH();
}

template <typename T, typename Op>
void launch_binary(Context& context, std::int64_t count, const T* a, const T* b, T* y, Op op) {
  if (count == 0) return;
  constexpr int V = device::kPackWidth<T>;
  const bool packed = count % V == 0 && aligned_to(a, 16) && aligned_to(b, 16) && aligned_to(y, 16);
  const std::int64_t work = packed ? count / V : count;
  const int blocks = plan::elementwise_blocks(work);
  if (packed) {
    binary_kernel<T, V><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(work, a, b, y, op);
  } else {
    binary_kernel<T, 1><<<blocks, plan::kElementwiseThreads, 0, context.stream()>>>(work, a, b, y, op);
  }
  TRAIN_CUDA_CHECK_LAUNCH();
}

}  // namespace

template <typename T>
void relu_forward(Context& context, std::int64_t count, const T* x, T* y) {
  check_count("relu_forward", count);
  launch_unary(context, count, x, y, ReluForward{});
}

template <typename T>
void relu_backward(Context& context, std::int64_t count, const T* y, const T* dy, T* dx) {
  check_count("relu_backward", count);
  launch_binary(context, count, y, dy, dx, ReluBackward{});
}

template <typename T>
void add(Context& context, std::int64_t count, const T* a, const T* b, T* y) {
  check_count("add", count);
  launch_binary(context, count, a, b, y, Add{});
}

template <typename From, typename To>
void cast(Context& context, std::int64_t count, const From* x, To* y) {
  check_count("cast", count);
  if (count == 0) return;
  cast_kernel<From, To><<<plan::elementwise_blocks(count), plan::kElementwiseThreads, 0, context.stream()>>>(
      count, x, y);
  TRAIN_CUDA_CHECK_LAUNCH();
}

#define TRAIN_INSTANTIATE(T)                                                              \
  template void relu_forward<T>(Context&, std::int64_t, const T*, T*);                    \
  template void relu_backward<T>(Context&, std::int64_t, const T*, const T*, T*);         \
  template void add<T>(Context&, std::int64_t, const T*, const T*, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(bf16)
#undef TRAIN_INSTANTIATE

template void cast<float, bf16>(Context&, std::int64_t, const float*, bf16*);
template void cast<bf16, float>(Context&, std::int64_t, const bf16*, float*);
template void cast<float, float>(Context&, std::int64_t, const float*, float*);
template void cast<bf16, bf16>(Context&, std::int64_t, const bf16*, bf16*);

}  // namespace train::kernels::cuda
