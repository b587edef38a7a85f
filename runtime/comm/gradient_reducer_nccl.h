// Summing gradient buckets across ranks with NCCL, the GPU twin of MpiGradientReducer: the same bucket
// plan over one flat device buffer of gradients, the same countdown (runtime/comm/gradient_reducer.h).
// When backward has written a bucket's last gradient, the bucket's preparation (the caller's: widening bf16 gradients into the fp32 buffer)
// is enqueued on the compute stream, then an event recorded there lets the communication stream start
// that bucket's ncclAllReduce (averaging over ranks) while backward goes on with the next layers;
// finish() makes the compute stream wait for the last reduction, so the optimizer that follows on the
// compute stream sees averaged gradients. Nothing here waits on the host inside a step.
#pragma once

#include "runtime/comm/gradient_reducer.h"
#include "runtime/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <vector>

namespace train::gpu {

class NcclGradientReducer final : public GradientReducer {
 public:
  // `gradients`: the flat device buffer of plan.total_elements elements of `type` (ncclFloat32 or
  // ncclBfloat16; its element size must be plan.element_bytes). `op` ncclAvg averages in the reduction
  // (use ncclSum when the loss gradient is already divided by the number of ranks). `timeout` bounds the
  // host's waits for a non-blocking communicator. `prepare`, when given, is enqueued on the compute stream
  // as each bucket completes, before the bucket's reduction waits for that stream.
  NcclGradientReducer(const NcclCommunicator& comm, BucketPlan plan, void* gradients, ncclDataType_t type,
                      cudaStream_t compute, std::chrono::milliseconds timeout, ncclRedOp_t op = ncclAvg,
                      Prepare prepare = {});
  ~NcclGradientReducer() override;

  // finish() enqueues the compute stream's wait for every bucket; it throws GpuError when NCCL fails.
  // Host-side bounded wait for this step's reductions (tests): NcclCommunicator::wait_for_event.
  void wait(std::chrono::milliseconds timeout) const;

  cudaStream_t communication_stream() const { return comm_stream_; }

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
  cudaStream_t compute_;
  cudaStream_t comm_stream_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::vector<cudaEvent_t> ready_;  // per bucket: its last gradient is written (compute stream)
  cudaEvent_t reduced_ = nullptr;   // every bucket reduced (communication stream)
};

}  // namespace train::gpu
