#pragma once
// kernels/ops.h: the contract of every numeric op of ResNet training.
//
// One function per op and direction. kernels/cpu/<name>.cpp holds the CPU implementation, which is the
// specification; kernels/cuda/ops_cuda.h declares the GPU twins with the same contracts (there in
// bf16/fp32), and kernels/cuda/<name>.cu, of the same name, implements them (the matrix product alone,
// kernels/cpu/gemm.cpp, has no twin: on the GPU, cuDNN and cuBLAS do it inside conv2d.cu and
// fully_connected.cu).
// The CPU ops are templates, instantiated for float (training) and double (the fp64 gradient checks of
// tests/unit/kernels/test_*.cpp run the very same code).
//
// Conventions that hold for every op below, unless an op says otherwise:
//
// Layouts (row-major, dense, no padding between rows):
//   activations   NHWC: x[((n*H + h)*W + w)*C + c]
//   conv weights  OHWI: w[((o*KH + kh)*KW + kw)*C_in + c]   (torchvision's OIHW exists only in model files)
//   FC weight     [out][in] as PyTorch's nn.Linear; FC bias [out]
//   batch norm    gamma, beta, running and saved statistics: one value per channel, [C]
//   logits        [N][classes]; labels int32 [N], 0-based
//
// Outputs are OVERWRITTEN, never accumulated. That holds for activations, for input gradients and for
// the gradients of weights (dw, dgamma, dbeta, db). Where two gradient flows meet (the residual junction
// of a bottleneck block: the identity path plus the branch), the caller sums them, e.g. with add().
// Output buffers need no initialisation (NaN garbage is fine).
//
// Aliasing: an output must not overlap an input unless the op says "may alias".
//
// Precision: the arithmetic is in T; reductions (batch statistics, norms, pooled sums, the loss)
// accumulate in double whatever T is.
//
// Threads and determinism: OpenMP with static schedules (the OpenMP thread count, OMP_NUM_THREADS) and
// OpenBLAS forced single-threaded inside our own parallel blocks. No floating-point atomics; every
// reduction is summed in a fixed order. The same inputs and the same thread count give bit-identical
// outputs. Ops without a matrix product (everything but gemm, conv2d_* and fully_connected_*) are
// bit-identical for any thread count as well: their reductions use blocks fixed by the shape alone.
//
// Scratch memory: conv2d_* keep a grow-only column buffer per OpenMP thread of about
// conv2d_workspace_limit() bytes (more only when a single output row, or for the input gradient the
// rows one input row needs, is larger).
//
// Preconditions (sizes positive, pointers valid) are the caller's; checked ones throw
// std::invalid_argument before any output is written.

#include <cstddef>
#include <cstdint>
#include <span>

namespace train::kernels {

// ---------------------------------------------------------------------------------------------------
// The CPU ops' thread count (kernels/cpu/threads.cpp): OpenMP's, which it reads from OMP_NUM_THREADS once,
// when the program starts; a process that learns its share of the cores later (a rank, after MPI_Init) sets
// it here before any op runs. cpu_threads() is the count the next parallel op uses.
void set_cpu_threads(int threads);
int cpu_threads();

// ---------------------------------------------------------------------------------------------------
// Matrix product (kernels/cpu/gemm.cpp), the engine of convolution and fully connected layers.
// C[m][n] = alpha * op(A)[m][k] * op(B)[k][n] + beta * C, all row-major; op(X) is X or X transposed.
// lda/ldb/ldc are row strides of A, B, C as stored. beta == 0 overwrites C without reading it.
// Split over threads along m or n (never k), each part one single-threaded BLAS call.
template <typename T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc);

// ---------------------------------------------------------------------------------------------------
// 2-D convolution without bias (kernels/cpu/conv2d.cpp). Any kernel size, stride and zero padding.
// x [n][h][w][in_c], w [out_c][kernel_h][kernel_w][in_c], y [n][out_h][out_w][out_c].
struct Conv2dShape {
  int n = 0, h = 0, w = 0, in_c = 0;  // input
  int out_c = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;

  // A square kernel with the same stride and padding in both directions (all of ResNet).
  static Conv2dShape square(int n, int h, int w, int in_c, int out_c, int kernel, int stride, int pad) {
    return Conv2dShape{n, h, w, in_c, out_c, kernel, kernel, stride, stride, pad, pad};
  }
  int out_h() const { return (h + 2 * pad_h - kernel_h) / stride_h + 1; }
  int out_w() const { return (w + 2 * pad_w - kernel_w) / stride_w + 1; }
  std::int64_t x_size() const { return std::int64_t{n} * h * w * in_c; }
  std::int64_t w_size() const { return std::int64_t{out_c} * kernel_h * kernel_w * in_c; }
  std::int64_t y_size() const { return std::int64_t{n} * out_h() * out_w() * out_c; }
  // Multiply-adds of the forward pass, times two (each gradient costs the same).
  double flops() const { return 2.0 * static_cast<double>(y_size()) * kernel_h * kernel_w * in_c; }
};

// y = conv(x, w).
template <typename T>
void conv2d_forward(const Conv2dShape& s, const T* x, const T* w, T* y);
// dx = dL/dx given dy = dL/dy (overwritten; padding positions get nothing).
template <typename T>
void conv2d_backward_input(const Conv2dShape& s, const T* dy, const T* w, T* dx);
// dw = dL/dw given the forward input x and dy (overwritten, summed over the batch).
template <typename T>
void conv2d_backward_weight(const Conv2dShape& s, const T* x, const T* dy, T* dw);

// Bytes of the column block each thread of conv2d_* builds and consumes at a time (default 8 MiB).
// Smaller limits mean more, smaller matrix products (results change in rounding only, through the
// summation order of dw). Set it before training starts; it is read at every call.
void set_conv2d_workspace_limit(std::size_t bytes);
std::size_t conv2d_workspace_limit();

// ---------------------------------------------------------------------------------------------------
// Batch normalisation over NHWC activations seen as rows x channels, rows = n*h*w
// (kernels/cpu/batch_norm.cpp). PyTorch's nn.BatchNorm2d semantics.

// Training mode: batch statistics (biased variance for normalising), y = (x - mean) * invstd * gamma + beta
// with invstd = 1 / sqrt(var + eps). Writes save_mean and save_invstd [channels] for the backward pass.
// Updates the running statistics in place, as PyTorch with momentum m (0.1 in ResNet):
//   running_mean = (1 - m) * running_mean + m * mean
//   running_var  = (1 - m) * running_var  + m * var * rows / (rows - 1)      (unbiased)
// running_mean/running_var may both be null (no update). Requires rows >= 2 (throws otherwise).
template <typename T>
void batch_norm_forward_train(std::int64_t rows, int channels, const T* x, const T* gamma, const T* beta, T eps,
                              T momentum, T* running_mean, T* running_var, T* y, T* save_mean, T* save_invstd);

// Backward of the training-mode forward (batch statistics are functions of x):
//   dbeta  = sum dy,  dgamma = sum dy * xhat,  xhat = (x - mean) * invstd
//   dx     = gamma * invstd * (dy - dbeta / rows - xhat * dgamma / rows)
// dx, dgamma, dbeta overwritten. dx may alias dy.
template <typename T>
void batch_norm_backward(std::int64_t rows, int channels, const T* x, const T* dy, const T* gamma,
                         const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta);

// Fused batch norm + ReLU, the conv-BN-ReLU pattern of every ResNet block: one pass over memory instead of
// two or three, and no stored BN output. Bit-identical to the unfused ops in sequence:
//   shortcut == null:  y = relu(batch_norm_forward_train(x))
//   otherwise:         y = relu(add(batch_norm_forward_train(x), shortcut))   (the end of a residual block)
// Arguments and statistics as batch_norm_forward_train; shortcut [rows][channels].
template <typename T>
void batch_norm_relu_forward_train(std::int64_t rows, int channels, const T* x, const T* shortcut, const T* gamma,
                                   const T* beta, T eps, T momentum, T* running_mean, T* running_var, T* y,
                                   T* save_mean, T* save_invstd);

// Backward of y = relu(batch_norm(x)) given y (the fused forward's output) and dy = dL/dy: bit-identical to
// batch_norm_backward(x, relu_backward(y, dy)), without storing the masked gradient. dx may alias dy.
template <typename T>
void batch_norm_relu_backward(std::int64_t rows, int channels, const T* x, const T* y, const T* dy, const T* gamma,
                              const T* save_mean, const T* save_invstd, T* dx, T* dgamma, T* dbeta);

// Inference mode: y = (x - running_mean) / sqrt(running_var + eps) * gamma + beta. y may alias x.
template <typename T>
void batch_norm_forward_inference(std::int64_t rows, int channels, const T* x, const T* gamma, const T* beta,
                                  const T* running_mean, const T* running_var, T eps, T* y);

// ---------------------------------------------------------------------------------------------------
// ReLU (kernels/cpu/elementwise.cpp), elementwise over count values.
// y = max(x, 0). y may alias x.
template <typename T>
void relu_forward(std::int64_t count, const T* x, T* y);
// dx = dy where y > 0, else 0; y is the forward OUTPUT (the mask y > 0 equals x > 0). dx may alias dy.
// NaN passes through both directions, as in PyTorch.
template <typename T>
void relu_backward(std::int64_t count, const T* y, const T* dy, T* dx);

// ---------------------------------------------------------------------------------------------------
// Elementwise sum (kernels/cpu/elementwise.cpp): the residual add y = a + b, and the sum of two gradient flows.
// y may alias a or b. Backward of y = a + b needs no kernel: da = db = dy, the caller passes dy to both
// branches and sums flows where they meet with add() again.
template <typename T>
void add(std::int64_t count, const T* a, const T* b, T* y);

// ---------------------------------------------------------------------------------------------------
// Max pooling (kernels/cpu/pool.cpp); ResNet's stem uses kernel 3, stride 2, padding 1.
// x [n][h][w][c] -> y [n][out_h][out_w][c]. Padding never wins (it is -infinity, as PyTorch).
struct Pool2dShape {
  int n = 0, h = 0, w = 0, c = 0;
  int kernel = 3, stride = 2, pad = 1;
  int out_h() const { return (h + 2 * pad - kernel) / stride + 1; }
  int out_w() const { return (w + 2 * pad - kernel) / stride + 1; }
  std::int64_t x_size() const { return std::int64_t{n} * h * w * c; }
  std::int64_t y_size() const { return std::int64_t{n} * out_h() * out_w() * c; }
};
// Writes y and argmax [n][out_h][out_w][c]: the winner's position ih * w + iw inside its image and
// channel. Ties go to the first element in window order (kh, then kw), as PyTorch. Requires pad < kernel
// (every window holds at least one real element).
template <typename T>
void max_pool_forward(const Pool2dShape& s, const T* x, T* y, std::int32_t* argmax);
// dx = dy routed to the winners (sums where windows overlap), zeros elsewhere; overwritten.
template <typename T>
void max_pool_backward(const Pool2dShape& s, const T* dy, const std::int32_t* argmax, T* dx);

// ---------------------------------------------------------------------------------------------------
// Global average pooling (kernels/cpu/pool.cpp): x [n][hw][c] (NHWC, hw = h*w) -> y [n][c].
template <typename T>
void global_avg_pool_forward(int n, int hw, int c, const T* x, T* y);
// dx[n][i][c] = dy[n][c] / hw; overwritten.
template <typename T>
void global_avg_pool_backward(int n, int hw, int c, const T* dy, T* dx);

// ---------------------------------------------------------------------------------------------------
// Fully connected layer (kernels/cpu/fully_connected.cpp): y[n][out] = x[n][in] * w^T + b,
// w [out][in] (PyTorch's), b [out] or null (no bias).
template <typename T>
void fully_connected_forward(int n, int in, int out, const T* x, const T* w, const T* b, T* y);
// dx = dy * w [n][in] (skipped when dx is null), dw = dy^T * x [out][in], db = sum over n of dy [out]
// (skipped when db is null). All overwritten.
template <typename T>
void fully_connected_backward(int n, int in, int out, const T* x, const T* w, const T* dy, T* dx, T* dw, T* db);

// ---------------------------------------------------------------------------------------------------
// Softmax cross-entropy with label smoothing (kernels/cpu/cross_entropy.cpp), PyTorch's
// nn.CrossEntropyLoss(label_smoothing=eps) with mean reduction:
//   loss_i = (1 - eps) * (-log p[i][label_i]) + eps * mean over classes j of (-log p[i][j])
//   loss   = mean over i of loss_i,   p = softmax(logits[i])
// Returns loss. Writes dlogits = d loss / d logits = (p - (1 - eps) * onehot - eps / classes) / n, unless
// null. dlogits may alias logits. Labels must be in [0, classes) (throws otherwise).
template <typename T>
double softmax_cross_entropy(int n, int classes, const T* logits, const std::int32_t* labels, T label_smoothing,
                             T* dlogits);

// ---------------------------------------------------------------------------------------------------
// Optimizer step over all parameter tensors at once (kernels/cpu/optimizer.cpp).
//
// SGD with momentum as torch.optim.SGD (dampening 0), in T, per element:
//   g'  = grad + weight_decay * param                  (weight_decay only on tensors flagged so)
//   buf = momentum * buf + g'                          (a zero buffer on the first step equals PyTorch's
//                                                        buf = g'; buf unused and may be null when momentum == 0)
//   param -= lr * (nesterov ? g' + momentum * buf : buf)
// LARS (options.lars), as apex's LARC wrapper with clip off and as MLPerf's ResNet: on weight-decayed
// tensors only, g' is scaled by the trust ratio before the momentum update,
//   trust = eta * ||param|| / (||grad|| + weight_decay * ||param|| + epsilon)  (1 when either norm is 0),
//   g'    = trust * (grad + weight_decay * param);
// tensors without weight decay (batch norm, biases) take the plain SGD step. Norms are taken before the
// update, in double, in a fixed order.
template <typename T>
struct SgdTensor {
  T* param = nullptr;
  const T* grad = nullptr;
  T* momentum_buffer = nullptr;  // same size as param; zero before the first step
  std::int64_t count = 0;
  bool weight_decay = true;  // false for batch norm and bias parameters
};
struct SgdOptions {
  double lr = 0.1;
  double momentum = 0.9;
  double weight_decay = 0.0;
  bool nesterov = false;
  bool lars = false;
  double lars_eta = 0.001;     // trust coefficient
  double lars_epsilon = 0.0;   // apex uses 1e-8
};
// Updates every param and momentum_buffer in place. grad is read only.
template <typename T>
void sgd_step(std::span<const SgdTensor<T>> tensors, const SgdOptions& options);

// The LARS trust ratio of one tensor as sgd_step computes it (exposed for logging and tests).
template <typename T>
double lars_trust_ratio(const SgdTensor<T>& tensor, const SgdOptions& options);

}  // namespace train::kernels
