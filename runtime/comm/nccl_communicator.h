// The job's NCCL communicator: rank 0 makes the unique id, MPI broadcasts it, every rank joins with its
// MPI rank on the GPU it pinned. Creation is bounded: it runs non-blocking (NCCL's config.blocking = 0)
// and is polled, so a rank that never joins becomes an error naming the wait instead of a hung job.
#pragma once

#include "common/non_copyable.h"

#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>

namespace train::comm {

class NcclCommunicator : private NonCopyable {
 public:
  NcclCommunicator(MPI_Comm comm, std::chrono::milliseconds timeout);
  ~NcclCommunicator();  // destroys (or, after an error, aborts) the communicator

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // Waits (bounded) until the communicator has finished its pending work or failed: for non-blocking
  // communicators NCCL calls may return ncclInProgress. Throws GpuError when NCCL reports a failure,
  // CollectiveTimeout past the bound.
  void wait_ready(std::chrono::milliseconds timeout, const char* what) const;
  // Waits on the host for `event` (work queued before it, NCCL's included) in short polls, at most
  // `timeout`, watching this communicator for a failed peer. Throws GpuError when CUDA or NCCL reports a
  // failure, CollectiveTimeout past the bound (another rank stuck or gone; TRAIN_STEP_TIMEOUT_SECONDS).
  void wait_for_event(cudaEvent_t event, std::chrono::milliseconds timeout, const char* what) const;
  // True once a wait above has failed or run out: the queued work may never finish (a peer is gone), so
  // whoever would drain it before freeing its memory aborts at once instead of waiting out the bound again.
  bool broken() const { return broken_; }
  // Aborts every operation still queued (a peer gone, a stream that never drains) and frees the
  // communicator without waiting for anyone; the destructor then has nothing to do.
  void abort();

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 1;
  mutable bool broken_ = false;
};

}  // namespace train::comm
