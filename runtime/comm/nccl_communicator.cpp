#include "runtime/comm/nccl_communicator.h"

#include "kernels/cuda/cuda_check.h"
#include "runtime/comm/mpi_check.h"
#include "runtime/comm/nccl_check.h"

#include <fmt/format.h>

#include <exception>
#include <thread>

namespace train::comm {

NcclCommunicator::NcclCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout) {
  MPI_CHECK(MPI_Comm_rank(comm, &rank_));
  MPI_CHECK(MPI_Comm_size(comm, &size_));
  ncclUniqueId id{};
  if (rank_ == 0) TRAIN_NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t started = ncclCommInitRankConfig(&comm_, size_, id, rank_, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    throw_nccl_error(started, "ncclCommInitRankConfig", __FILE__, __LINE__);
  }
  wait_ready(timeout, "joining the NCCL communicator (every rank must join)");
}

namespace {

// Marks the communicator broken when a wait leaves by an exception (a failure or the bound run out).
class BrokenOnThrow {
 public:
  explicit BrokenOnThrow(bool& broken) : broken_(broken) {}
  ~BrokenOnThrow() {
    if (std::uncaught_exceptions() > exceptions_) broken_ = true;
  }

 private:
  bool& broken_;
  int exceptions_ = std::uncaught_exceptions();
};

}  // namespace

void NcclCommunicator::wait_ready(std::chrono::milliseconds timeout, const char* what) const {
  const BrokenOnThrow marker(broken_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    ncclResult_t state = ncclSuccess;
    TRAIN_NCCL_CHECK(ncclCommGetAsyncError(comm_, &state));
    if (state == ncclSuccess) return;
    if (state != ncclInProgress) throw_nccl_error(state, what, __FILE__, __LINE__);
    if (std::chrono::steady_clock::now() > deadline) {
      throw CollectiveTimeout(fmt::format(
          "rank {}: {} did not complete within {} s (TRAIN_STEP_TIMEOUT_SECONDS): another rank is stuck or gone",
          rank_, what, timeout.count() / 1000));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

void NcclCommunicator::wait_for_event(cudaEvent_t event, std::chrono::milliseconds timeout, const char* what) const {
  const BrokenOnThrow marker(broken_);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const cudaError_t state = cudaEventQuery(event);
    if (state == cudaSuccess) return;
    // The query's status, named by what was awaited: TRAIN_CUDA_CHECK's own check, which throws for it.
    if (state != cudaErrorNotReady) kernels::cuda::detail::check_cuda(state, what, __FILE__, __LINE__);
    ncclResult_t nccl_state = ncclSuccess;
    TRAIN_NCCL_CHECK(ncclCommGetAsyncError(comm_, &nccl_state));
    if (nccl_state != ncclSuccess && nccl_state != ncclInProgress) throw_nccl_error(nccl_state, what, __FILE__, __LINE__);
    if (std::chrono::steady_clock::now() > deadline) {
      throw CollectiveTimeout(fmt::format(
          "rank {}: waiting for {} took longer than {} s (TRAIN_STEP_TIMEOUT_SECONDS): another rank is stuck or gone",
          rank_, what, timeout.count() / 1000));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

void NcclCommunicator::abort() {
  if (comm_ == nullptr) return;
  ncclCommAbort(comm_);  // its result cannot help: the communicator is being given up
  comm_ = nullptr;
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ == nullptr) return;
  // Finalising flushes pending work and needs every peer; a communicator in error (a wait already failed
  // or ran out), or whose peers do not finish within the bound, is aborted instead (which frees it without
  // waiting for anyone).
  bool clean = !broken_ && ncclCommFinalize(comm_) != ncclSystemError;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (clean) {
    ncclResult_t state = ncclSuccess;
    if (ncclCommGetAsyncError(comm_, &state) != ncclSuccess || (state != ncclSuccess && state != ncclInProgress)) {
      clean = false;
    } else if (state == ncclSuccess) {
      break;
    } else if (std::chrono::steady_clock::now() > deadline) {
      clean = false;
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (clean) {
    ncclCommDestroy(comm_);
  } else {
    ncclCommAbort(comm_);
  }
}

}  // namespace train::comm
