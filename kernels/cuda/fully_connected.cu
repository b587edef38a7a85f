// kernels/cuda/fully_connected.cu: y = x w^T + b and its gradients through cuBLAS (fp32 accumulation;
// fp32 inputs without TF32), plus two small kernels: the bias broadcast and the bias gradient.
//
// cuBLAS is column-major; a row-major [r][c] matrix is the column-major c x r matrix. So, with
// x [n][in], w [out][in], dy [n][out] row-major:
//   y^T  (out x n)  = w'^T x'        gemm(T, N, m=out, n=n,   k=in,  A=w  lda=in,  B=x  ldb=in)
//   dx^T (in x n)   = w' dy'         gemm(N, N, m=in,  n=n,   k=out, A=w  lda=in,  B=dy ldb=out)
//   dw^T (in x out) = x' dy'^T       gemm(N, T, m=in,  n=out, k=n,   A=x  lda=in,  B=dy ldb=out)
// where w' etc. are the column-major views of the row-major buffers.
//
// The bias is added by cuBLAS itself: y is first filled with b broadcast over rows and the product is
// accumulated with beta = 1, so in bf16 the sum is rounded once (cuBLAS adds beta * C in fp32).

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/ops_cuda.h"

#include <cublas_v2.h>

#include <stdexcept>

namespace train::kernels::cuda {
namespace {

using device::from_float;
using device::to_float;

template <typename T>
constexpr cudaDataType_t cuda_data_type();
template <>
constexpr cudaDataType_t cuda_data_type<float>() { return CUDA_R_32F; }
template <>
constexpr cudaDataType_t cuda_data_type<bf16>() { return CUDA_R_16BF; }

template <typename T>
__global__ void broadcast_rows(std::int64_t count, int width, const T* row, T* out) {
  for (std::int64_t i = device::global_thread(); i < count; i += device::grid_stride()) out[i] = row[i % width];
}

// sums[o] = sum over r of m[r][o], in fp64 and row order (n is a batch: short columns).
template <typename T>
__global__ void column_sums(int rows, int width, const T* m, T* sums) {
  const int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= width) return;
  double total = 0.0;
  for (int r = 0; r < rows; ++r) total += static_cast<double>(to_float(m[static_cast<std::int64_t>(r) * width + o]));
  sums[o] = from_float<T>(static_cast<float>(total));
}

// C (m x n, column-major) = alpha op(A) op(B) + beta C with fp32 accumulation.
template <typename T>
void gemm(Context& context, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k, const T* a, int lda,
          const T* b, int ldb, float beta, T* c, int ldc) {
  const float alpha = 1.0f;
  constexpr cudaDataType_t type = cuda_data_type<T>();
  // CUBLAS_COMPUTE_32F (not _FAST_TF32): full fp32 products for fp32 data; bf16 data runs on tensor
  // cores with fp32 accumulation.
  TRAIN_CUBLAS_CHECK(cublasGemmEx(context.cublas(), op_a, op_b, m, n, k, &alpha, a, type, lda, b, type, ldb, &beta, c,
                                  type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void check_sizes(const char* op, int n, int in, int out) {
  if (n <= 0 || in <= 0 || out <= 0) throw std::invalid_argument(std::string(op) + ": expected positive sizes");
}

}  // namespace

template <typename T>
void fully_connected_forward(Context& context, int n, int in, int out, const T* x, const T* w, const T* b, T* y) {
  check_sizes("fully_connected_forward", n, in, out);
  float beta = 0.0f;
  if (b != nullptr) {
    const std::int64_t count = static_cast<std::int64_t>(n) * out;
    broadcast_rows<T><<<plan::elementwise_blocks(count), plan::kElementwiseThreads, 0, context.stream()>>>(count, out,
                                                                                                          b, y);
    TRAIN_CUDA_CHECK_LAUNCH();
    beta = 1.0f;
  }
  gemm<T>(context, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, w, in, x, in, beta, y, out);
}

template <typename T>
void fully_connected_backward(Context& context, int n, int in, int out, const T* x, const T* w, const T* dy, T* dx,
                              T* dw, T* db) {
  check_sizes("fully_connected_backward", n, in, out);
  if (dx != nullptr) gemm<T>(context, CUBLAS_OP_N, CUBLAS_OP_N, in, n, out, w, in, dy, out, 0.0f, dx, in);
  gemm<T>(context, CUBLAS_OP_N, CUBLAS_OP_T, in, out, n, x, in, dy, out, 0.0f, dw, in);
  if (db != nullptr) {
    column_sums<T><<<static_cast<int>(plan::ceil_div(out, 256)), 256, 0, context.stream()>>>(n, out, dy, db);
    TRAIN_CUDA_CHECK_LAUNCH();
  }
}

#define TRAIN_INSTANTIATE(T)                                                                                   \
  template void fully_connected_forward<T>(Context&, int, int, int, const T*, const T*, const T*, T*);        \
  template void fully_connected_backward<T>(Context&, int, int, int, const T*, const T*, const T*, T*, T*, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(bf16)
#undef TRAIN_INSTANTIATE

}  // namespace train::kernels::cuda
