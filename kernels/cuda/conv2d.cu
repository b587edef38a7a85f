// kernels/cuda/conv2d.cu: convolution forward and both gradients through cuDNN's (legacy, v9-supported)
// convolution API with NHWC tensors and KRSC (= OHWI) filters.
//
// A ConvPlan per shape and element type is made on first use and cached in the Context: descriptors,
// and for each direction the algorithm cuDNN's heuristics rank first among those that
//   - are supported for the shape (status success),
//   - are deterministic (bit-identical results run to run; cuDNN's atomics-based weight-gradient
//     algorithms are not), and
//   - in fp32 use plain FMA math: no TF32 and no down-conversion, so the fp32 mode checks against the
//     CPU to 1e-4.
// The heuristics (cudnnGet*_v7) run on the host only; nothing is timed, nothing synchronises. If no
// algorithm passes the determinism filter, the best supported one is taken and stderr says so once.

#include "kernels/cuda/conv_plan.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/ops_cuda.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace train::kernels::cuda {
namespace {

// Workspaces above this are refused at selection: a faster algorithm is not worth a GiB of memory.
constexpr std::size_t kMaxConvWorkspace = std::size_t{1} << 30;

template <typename T>
constexpr cudnnDataType_t cudnn_data_type();
template <>
constexpr cudnnDataType_t cudnn_data_type<float>() { return CUDNN_DATA_FLOAT; }
template <>
constexpr cudnnDataType_t cudnn_data_type<bf16>() { return CUDNN_DATA_BFLOAT16; }

void check_shape(const Conv2dShape& s) {
  if (s.n <= 0 || s.h <= 0 || s.w <= 0 || s.in_c <= 0 || s.out_c <= 0 || s.kernel_h <= 0 || s.kernel_w <= 0 ||
      s.stride_h <= 0 || s.stride_w <= 0 || s.pad_h < 0 || s.pad_w < 0 || s.out_h() <= 0 || s.out_w() <= 0) {
    throw std::invalid_argument("conv2d: expected positive sizes and strides, non-negative padding and a kernel "
                                "that fits the padded input");
  }
}

// fp32 must not use tensor-core math (TF32 or conversion to half types); bf16 may use anything.
bool math_allowed(cudnnDataType_t type, cudnnMathType_t math) {
  if (type != CUDNN_DATA_FLOAT) return true;
  return math == CUDNN_FMA_MATH || math == CUDNN_DEFAULT_MATH;
}

// Picks from cuDNN's ranked list (Perf: one of the cudnnConvolution*AlgoPerf_t structs).
template <typename Perf>
ConvAlgorithmChoice choose(const std::vector<Perf>& ranked, int returned, cudnnDataType_t type, const char* direction,
                           const Conv2dShape& s) {
  const Perf* fallback = nullptr;
  for (int i = 0; i < returned; ++i) {
    const Perf& p = ranked[static_cast<std::size_t>(i)];
    if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxConvWorkspace || !math_allowed(type, p.mathType)) continue;
    if (p.determinism == CUDNN_DETERMINISTIC) {
      return ConvAlgorithmChoice{static_cast<int>(p.algo), p.memory, true, p.mathType};
    }
    if (fallback == nullptr) fallback = &p;
  }
  const std::string shape = "n=" + std::to_string(s.n) + " h=" + std::to_string(s.h) + " w=" + std::to_string(s.w) +
                            " in_c=" + std::to_string(s.in_c) + " out_c=" + std::to_string(s.out_c) +
                            " kernel=" + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) +
                            " stride=" + std::to_string(s.stride_h) + " pad=" + std::to_string(s.pad_h) +
                            (type == CUDNN_DATA_FLOAT ? " fp32" : " bf16");
  if (fallback == nullptr) {
    throw std::runtime_error(std::string("conv2d: cuDNN offers no usable ") + direction + " algorithm for " + shape);
  }
  std::fprintf(stderr, "train: warning: conv2d %s (%s): cuDNN offers no deterministic algorithm; using algorithm %d\n",
               direction, shape.c_str(), static_cast<int>(fallback->algo));
  return ConvAlgorithmChoice{static_cast<int>(fallback->algo), fallback->memory, false, fallback->mathType};
}

CudnnConvolutionDescriptor make_conv_descriptor(const Conv2dShape& s, cudnnDataType_t type) {
  cudnnConvolutionDescriptor_t conv = nullptr;
  TRAIN_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv));
  CudnnConvolutionDescriptor owned(conv);
  // Cross-correlation (no kernel flip), as PyTorch and the CPU reference; accumulation in fp32.
  TRAIN_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv, s.pad_h, s.pad_w, s.stride_h, s.stride_w, 1, 1,
                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  const cudnnMathType_t math = type == CUDNN_DATA_FLOAT ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
  TRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, math));
  return owned;
}

// An NHWC tensor descriptor of [n][h][w][c].
CudnnTensorDescriptor make_tensor_descriptor(cudnnDataType_t type, int n, int c, int h, int w) {
  cudnnTensorDescriptor_t descriptor = nullptr;
  TRAIN_CUDNN_CHECK(cudnnCreateTensorDescriptor(&descriptor));
  CudnnTensorDescriptor owned(descriptor);
  TRAIN_CUDNN_CHECK(cudnnSetTensor4dDescriptor(descriptor, CUDNN_TENSOR_NHWC, type, n, c, h, w));
  return owned;
}

// bf16: the direction's descriptor takes the math type its algorithm was ranked with (as cuDNN advises
// for the _v7 heuristics). fp32 keeps FMA math whatever was reported.
void adopt_math_type(cudnnConvolutionDescriptor_t conv, cudnnDataType_t type, const ConvAlgorithmChoice& choice) {
  if (type != CUDNN_DATA_FLOAT) TRAIN_CUDNN_CHECK(cudnnSetConvolutionMathType(conv, choice.math_type));
}

std::unique_ptr<ConvPlan> make_plan(Context& context, const Conv2dShape& s, cudnnDataType_t type) {
  auto plan = std::make_unique<ConvPlan>();
  plan->x = make_tensor_descriptor(type, s.n, s.in_c, s.h, s.w);
  plan->y = make_tensor_descriptor(type, s.n, s.out_c, s.out_h(), s.out_w());
  cudnnFilterDescriptor_t filter = nullptr;
  TRAIN_CUDNN_CHECK(cudnnCreateFilterDescriptor(&filter));
  plan->w.reset(filter);
  // NHWC filter format = KRSC: [out_c][kernel_h][kernel_w][in_c], our OHWI.
  TRAIN_CUDNN_CHECK(
      cudnnSetFilter4dDescriptor(plan->w.get(), type, CUDNN_TENSOR_NHWC, s.out_c, s.in_c, s.kernel_h, s.kernel_w));
  plan->forward_conv = make_conv_descriptor(s, type);
  plan->backward_data_conv = make_conv_descriptor(s, type);
  plan->backward_filter_conv = make_conv_descriptor(s, type);

  // cuDNN must agree with our output size (it computes the same formula; a mismatch means a bug here).
  int n = 0, c = 0, h = 0, w = 0;
  TRAIN_CUDNN_CHECK(cudnnGetConvolution2dForwardOutputDim(plan->forward_conv.get(), plan->x.get(), plan->w.get(), &n,
                                                          &c, &h, &w));
  if (n != s.n || c != s.out_c || h != s.out_h() || w != s.out_w()) {
    throw std::logic_error("conv2d: cuDNN's output shape differs from Conv2dShape's");
  }

  cudnnHandle_t handle = context.cudnn();
  {
    int max_count = 0, returned = 0;
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionFwdAlgoPerf_t> ranked(static_cast<std::size_t>(max_count));
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(handle, plan->x.get(), plan->w.get(),
                                                             plan->forward_conv.get(), plan->y.get(), max_count,
                                                             &returned, ranked.data()));
    plan->forward = choose(ranked, returned, type, "forward", s);
    adopt_math_type(plan->forward_conv.get(), type, plan->forward);
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(
        handle, plan->x.get(), plan->w.get(), plan->forward_conv.get(), plan->y.get(),
        static_cast<cudnnConvolutionFwdAlgo_t>(plan->forward.algorithm), &plan->forward.workspace_bytes));
  }
  {
    int max_count = 0, returned = 0;
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdDataAlgoPerf_t> ranked(static_cast<std::size_t>(max_count));
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, plan->w.get(), plan->y.get(),
                                                                  plan->backward_data_conv.get(), plan->x.get(),
                                                                  max_count, &returned, ranked.data()));
    plan->backward_data = choose(ranked, returned, type, "input-gradient", s);
    adopt_math_type(plan->backward_data_conv.get(), type, plan->backward_data);
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(
        handle, plan->w.get(), plan->y.get(), plan->backward_data_conv.get(), plan->x.get(),
        static_cast<cudnnConvolutionBwdDataAlgo_t>(plan->backward_data.algorithm),
        &plan->backward_data.workspace_bytes));
  }
  {
    int max_count = 0, returned = 0;
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(handle, &max_count));
    std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> ranked(static_cast<std::size_t>(max_count));
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
        handle, plan->x.get(), plan->y.get(), plan->backward_filter_conv.get(), plan->w.get(), max_count, &returned,
        ranked.data()));
    plan->backward_filter = choose(ranked, returned, type, "weight-gradient", s);
    adopt_math_type(plan->backward_filter_conv.get(), type, plan->backward_filter);
    TRAIN_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        handle, plan->x.get(), plan->y.get(), plan->backward_filter_conv.get(), plan->w.get(),
        static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan->backward_filter.algorithm),
        &plan->backward_filter.workspace_bytes));
  }
  return plan;
}

template <typename T>
ConvPlan& plan_for(Context& context, const Conv2dShape& s) {
  check_shape(s);
  constexpr cudnnDataType_t type = cudnn_data_type<T>();
  const ConvPlanKey key{s.n,        s.h,        s.w,        s.in_c,  s.out_c, s.kernel_h,
                        s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w, static_cast<int>(type)};
  auto& plans = context.conv_plans();
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, make_plan(context, s, type)).first;
  return *found->second;
}

// The Context's workspace for an algorithm; cuDNN accepts a null pointer for zero bytes.
void* workspace_for(Context& context, std::size_t bytes) { return bytes == 0 ? nullptr : context.workspace(bytes); }

}  // namespace

// alpha = 1, beta = 0 everywhere: outputs are overwritten and, with beta zero, never read (NaN garbage in
// them does not leak through). Scaling factors are float for float and bf16 data alike.
template <typename T>
void conv2d_forward(Context& context, const Conv2dShape& s, const T* x, const T* w, T* y) {
  ConvPlan& plan = plan_for<T>(context, s);
  const float alpha = 1.0f, beta = 0.0f;
  void* workspace = workspace_for(context, plan.forward.workspace_bytes);
  TRAIN_CUDNN_CHECK(cudnnConvolutionForward(context.cudnn(), &alpha, plan.x.get(), x, plan.w.get(), w,
                                            plan.forward_conv.get(),
                                            static_cast<cudnnConvolutionFwdAlgo_t>(plan.forward.algorithm), workspace,
                                            plan.forward.workspace_bytes, &beta, plan.y.get(), y));
}

template <typename T>
void conv2d_backward_input(Context& context, const Conv2dShape& s, const T* dy, const T* w, T* dx) {
  ConvPlan& plan = plan_for<T>(context, s);
  const float alpha = 1.0f, beta = 0.0f;
  void* workspace = workspace_for(context, plan.backward_data.workspace_bytes);
  TRAIN_CUDNN_CHECK(cudnnConvolutionBackwardData(
      context.cudnn(), &alpha, plan.w.get(), w, plan.y.get(), dy, plan.backward_data_conv.get(),
      static_cast<cudnnConvolutionBwdDataAlgo_t>(plan.backward_data.algorithm), workspace,
      plan.backward_data.workspace_bytes, &beta, plan.x.get(), dx));
}

template <typename T>
void conv2d_backward_weight(Context& context, const Conv2dShape& s, const T* x, const T* dy, T* dw) {
  ConvPlan& plan = plan_for<T>(context, s);
  const float alpha = 1.0f, beta = 0.0f;
  void* workspace = workspace_for(context, plan.backward_filter.workspace_bytes);
  TRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(
      context.cudnn(), &alpha, plan.x.get(), x, plan.y.get(), dy, plan.backward_filter_conv.get(),
      static_cast<cudnnConvolutionBwdFilterAlgo_t>(plan.backward_filter.algorithm), workspace,
      plan.backward_filter.workspace_bytes, &beta, plan.w.get(), dw));
}

template <typename T>
std::size_t conv2d_workspace_bytes(Context& context, const Conv2dShape& s) {
  const ConvPlan& plan = plan_for<T>(context, s);
  return std::max({plan.forward.workspace_bytes, plan.backward_data.workspace_bytes,
                   plan.backward_filter.workspace_bytes});
}

#define TRAIN_INSTANTIATE(T)                                                                     \
  template std::size_t conv2d_workspace_bytes<T>(Context&, const Conv2dShape&);                 \
  template void conv2d_forward<T>(Context&, const Conv2dShape&, const T*, const T*, T*);        \
  template void conv2d_backward_input<T>(Context&, const Conv2dShape&, const T*, const T*, T*); \
  template void conv2d_backward_weight<T>(Context&, const Conv2dShape&, const T*, const T*, T*);
TRAIN_INSTANTIATE(float)
TRAIN_INSTANTIATE(bf16)
#undef TRAIN_INSTANTIATE

}  // namespace train::kernels::cuda
