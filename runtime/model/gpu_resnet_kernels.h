#pragma once
// runtime/model/gpu_resnet_kernels.h (internal to GpuResNet): the small kernels a training step needs
// that kernels/cuda/ops_cuda.h has no op for. Both enqueue on `stream` and never synchronise the host.
// T is float or __nv_bfloat16. Plain C++17 (the .cu is compiled in runtime/, where nvcc runs C++17).

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace train::model::detail {

// values[i] = values[i] * scale, in fp32 and rounded once to T (for float: exactly the CPU model's
// `dlogits[i] *= gradient_scale`).
template <typename T>
void scale_values(cudaStream_t stream, std::int64_t count, T* values, float scale);

// *hits = the number of rows i of logits [n][classes] whose first largest value sits at labels[i]
// (std::max_element's choice, as CpuResNet counts top-1). One block; integer sums: deterministic.
template <typename T>
void count_top1(cudaStream_t stream, int n, int classes, const T* logits, const std::int32_t* labels,
                std::int32_t* hits);

}  // namespace train::model::detail
