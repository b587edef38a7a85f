#pragma once
// kernels/cuda/device_out_of_memory.h: the one error type for "the GPU has no room": thrown by the CUDA,
// cuDNN and cuBLAS call checks (kernels/cuda/cuda_check.h) and by the models' allocations, so that the
// engine can say "the batch does not fit" (with the model, the batch and the GPU's memory) instead of
// "internal error", whether it happens when the model is made or later.

#include <stdexcept>

namespace train::kernels::cuda {

class DeviceOutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace train::kernels::cuda
