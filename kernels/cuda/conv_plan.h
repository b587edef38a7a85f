#pragma once
// kernels/cuda/conv_plan.h (internal): the cuDNN side of one convolution shape, made once per shape and
// element type and kept in the Context: tensor/filter descriptors, and per direction (forward, input
// gradient, weight gradient) a convolution descriptor, the chosen algorithm and its workspace size.

#include "kernels/cuda/handles.h"

#include <cudnn.h>

#include <cstddef>

namespace train::kernels::cuda {

struct ConvAlgorithmChoice {
  int algorithm = -1;            // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  std::size_t workspace_bytes = 0;
  bool deterministic = true;     // false only when cuDNN offered no deterministic algorithm
  cudnnMathType_t math_type = CUDNN_DEFAULT_MATH;  // what cuDNN ranked the algorithm with
};

struct ConvPlan {
  CudnnTensorDescriptor x;  // input (and input gradient)
  CudnnTensorDescriptor y;  // output (and output gradient)
  CudnnFilterDescriptor w;  // weights (and weight gradient), KRSC = OHWI
  // One convolution descriptor per direction: each carries the math type its algorithm was chosen with.
  CudnnConvolutionDescriptor forward_conv, backward_data_conv, backward_filter_conv;
  ConvAlgorithmChoice forward, backward_data, backward_filter;
};

}  // namespace train::kernels::cuda
