// Summing gradient buckets across ranks with NCCL, the GPU twin of MpiGradientReducer: the same bucket
// plan over one flat device buffer of gradients, the same countdown (runtime/comm/gradient_reducer.h).
// When backward has written a bucket's last gradient, the bucket's preparation (the caller's: widening
// bf16 gradients into the fp32 buffer) is enqueued on the compute stream, then an event recorded there
// lets the communication stream start that bucket's ncclAllReduce (averaging over ranks) while backward
// goes on with the next layers; finish() makes the compute stream wait for the last reduction, so the
// optimizer that follows on the compute stream sees averaged gradients. Nothing here waits on the host
// inside a step.
#pragma once

#include "runtime/comm/gradient_reducer.h"
#include "runtime/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>

namespace train::comm {

class NcclGradientReducer final : public GradientReducer {
 public:
  // The streams it enqueues on and the events that order them, all its owner's (kernels/cuda/handles.h
  // owns them: runtime/comm/ includes nothing of kernels/). Backward writes the gradients on `compute`;
  // the reductions run on `communication` (best at the device's highest priority, so that the small,
  // latency-bound collectives start as soon as their bucket is ready). `ready` is recorded on `compute` as
  // each bucket completes and waited for by `communication` right away (one event serves every bucket: a
  // wait takes the record made before it); `reduced` the other way round, by finish().
  struct Streams {
    cudaStream_t compute = nullptr;
    cudaStream_t communication = nullptr;
    cudaEvent_t ready = nullptr;
    cudaEvent_t reduced = nullptr;
  };

  // `gradients`: the flat device buffer of plan.total_elements elements of `type` (ncclFloat32 or
  // ncclBfloat16; its element size must be plan.element_bytes). `op` ncclAvg averages in the reduction
  // (use ncclSum when the loss gradient is already divided by the number of ranks). `timeout` bounds the
  // host's waits for a non-blocking communicator. `prepare`, when given, is enqueued on the compute stream
  // as each bucket completes, before the bucket's reduction waits for that stream.
  NcclGradientReducer(const NcclCommunicator& comm, BucketPlan plan, void* gradients, ncclDataType_t type,
                      Streams streams, std::chrono::milliseconds timeout, ncclRedOp_t op = ncclAvg,
                      Prepare prepare = {});

  // finish() enqueues the compute stream's wait for every bucket; it throws GpuError when NCCL fails.
  // Host-side bounded wait for this step's reductions (tests): NcclCommunicator::wait_for_event.
  void wait(std::chrono::milliseconds timeout) const;

 private:
  // Enqueued on the communication stream: its wait for the compute stream, the hooks' `started`, the
  // ncclAllReduce, the hooks' `finished` (hooks record device timestamps there, in stream order).
  void start_bucket(size_t bucket) override;
  void finish_buckets() override;

  const NcclCommunicator& comm_;
  char* gradients_;
  size_t element_bytes_;
  ncclDataType_t type_;
  ncclRedOp_t op_;
  Streams streams_;
  std::chrono::milliseconds timeout_;
};

}  // namespace train::comm
