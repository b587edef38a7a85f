#pragma once
// kernels/cuda/conv_plan.h (internal): the cuDNN side of one convolution shape, made once per shape and
// element type and kept in the Context: tensor/filter descriptors, and per direction (forward, input
// gradient, weight gradient) a convolution descriptor, the chosen algorithm and its workspace size.

#include "kernels/cuda/cuda_check.h"

#include <cudnn.h>

#include <cstddef>

namespace train::ops::cuda {

struct ConvAlgorithmChoice {
  int algorithm = -1;            // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  std::size_t workspace_bytes = 0;
  bool deterministic = true;     // false only when cuDNN offered no deterministic algorithm
  cudnnMathType_t math_type = CUDNN_DEFAULT_MATH;  // what cuDNN ranked the algorithm with
};

struct ConvPlan {
  cudnnTensorDescriptor_t x = nullptr;   // input (and input gradient)
  cudnnTensorDescriptor_t y = nullptr;   // output (and output gradient)
  cudnnFilterDescriptor_t w = nullptr;   // weights (and weight gradient), KRSC = OHWI
  // One convolution descriptor per direction: each carries the math type its algorithm was chosen with.
  cudnnConvolutionDescriptor_t forward_conv = nullptr, backward_data_conv = nullptr, backward_filter_conv = nullptr;
  ConvAlgorithmChoice forward, backward_data, backward_filter;

  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    // Destruction must not throw: statuses are ignored here.
    if (x != nullptr) cudnnDestroyTensorDescriptor(x);
    if (y != nullptr) cudnnDestroyTensorDescriptor(y);
    if (w != nullptr) cudnnDestroyFilterDescriptor(w);
    if (forward_conv != nullptr) cudnnDestroyConvolutionDescriptor(forward_conv);
    if (backward_data_conv != nullptr) cudnnDestroyConvolutionDescriptor(backward_data_conv);
    if (backward_filter_conv != nullptr) cudnnDestroyConvolutionDescriptor(backward_filter_conv);
  }
};

}  // namespace train::ops::cuda
