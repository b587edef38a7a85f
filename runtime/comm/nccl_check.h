// Every NCCL call of the GPU rank goes through TRAIN_NCCL_CHECK: a failure throws GpuError naming the call,
// the rank, the file and line, and NCCL's own words, so the job's failure reason says which rank and which
// call went wrong. CUDA runtime calls (here and everywhere) go through the one TRAIN_CUDA_CHECK of
// kernels/cuda/cuda_check.h, the one file of kernels/ that runtime/comm/ includes.
#pragma once

#include <nccl.h>

#include <stdexcept>
#include <string>

namespace train::comm {

class GpuError : public std::runtime_error {
 public:
  explicit GpuError(const std::string& message) : std::runtime_error(message) {}
};

// The rank named in messages (set once at start-up).
void set_error_rank(int rank);
int error_rank();

[[noreturn]] void throw_nccl_error(ncclResult_t status, const char* call, const char* file, int line);

}  // namespace train::comm

#define TRAIN_NCCL_CHECK(call)                                                                                   \
  do {                                                                                                           \
    const ncclResult_t train_status_ = (call);                                                                   \
    if (train_status_ != ncclSuccess) ::train::comm::throw_nccl_error(train_status_, #call, __FILE__, __LINE__); \
  } while (0)
