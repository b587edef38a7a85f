#include "runtime/comm/nccl_check.h"

#include <fmt/format.h>

#include <atomic>

namespace train::comm {

namespace {
std::atomic<int> rank_for_messages{-1};
}

void set_error_rank(int rank) { rank_for_messages = rank; }
int error_rank() { return rank_for_messages; }

void throw_nccl_error(ncclResult_t status, const char* call, const char* file, int line) {
  // ncclGetLastError holds the detail NCCL logged for the failing call (which peer, which transport).
  throw GpuError(fmt::format("rank {}: {} failed: {} ({}) at {}:{}", error_rank(), call, ncclGetErrorString(status),
                             ncclGetLastError(nullptr), file, line));
}

}  // namespace train::comm
