// Summing gradient buckets across ranks with NCCL (runtime/comm/gradient_buckets.h), the GPU twin of MpiGradientReducer:
// the same bucket plan over one flat device buffer of gradients. When backward has written a bucket's
// last gradient, the bucket's preparation (the caller's: widening bf16 gradients into the fp32 buffer)
// is enqueued on the compute stream, then an event recorded there lets the communication stream start
// that bucket's ncclAllReduce (averaging over ranks) while backward goes on with the next layers;
// finish() makes the compute stream wait for the last reduction, so the optimizer that follows on the
// compute stream sees averaged gradients. Nothing here waits on the host inside a step.
#pragma once

#include "runtime/comm/bucket_hooks.h"
#include "runtime/comm/gradient_buckets.h"
#include "runtime/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <vector>

namespace train::gpu {

class NcclGradientReducer {
 public:
  // Prepares a bucket's elements [begin, end) for its reduction, enqueued on the compute stream.
  using Prepare = std::function<void(size_t begin, size_t end)>;
  // `gradients`: the flat device buffer of plan.total_elements elements of `type` (ncclFloat32 or
  // ncclBfloat16; its element size must be plan.element_bytes). `op` ncclAvg averages in the reduction
  // (use ncclSum when the loss gradient is already divided by the number of ranks). `timeout` bounds the
  // host's waits for a non-blocking communicator. `prepare`, when given, runs as each bucket completes.
  NcclGradientReducer(const NcclCommunicator& comm, BucketPlan plan, void* gradients, ncclDataType_t type,
                      cudaStream_t compute, std::chrono::milliseconds timeout, ncclRedOp_t op = ncclAvg,
                      Prepare prepare = {});
  ~NcclGradientReducer();
  NcclGradientReducer(const NcclGradientReducer&) = delete;
  NcclGradientReducer& operator=(const NcclGradientReducer&) = delete;

  void begin_step();
  // Backward has enqueued (on the compute stream) the last write of parameter `tensor`'s gradient.
  void tensor_ready(int tensor);
  // Enqueues the compute stream's wait for every bucket. Throws GpuError when a bucket never got all its
  // tensors (a bug in the caller) or NCCL fails.
  void finish();
  // Host-side bounded wait for this step's reductions (tests): NcclCommunicator::wait_for_event.
  void wait(std::chrono::milliseconds timeout) const;

  const BucketPlan& plan() const { return plan_; }
  cudaStream_t communication_stream() const { return comm_stream_; }
  // The timeline's hooks (runtime/comm/bucket_hooks.h: called while enqueueing, in stream order on
  // communication_stream()); empty hooks turn them off.
  void set_bucket_hooks(BucketHooks hooks) { hooks_ = std::move(hooks); }

 private:
  void start_bucket(size_t bucket);
  const NcclCommunicator& comm_;
  BucketPlan plan_;
  char* gradients_;
  size_t element_bytes_;
  ncclDataType_t type_;
  ncclRedOp_t op_;
  Prepare prepare_;
  cudaStream_t compute_;
  cudaStream_t comm_stream_ = nullptr;
  std::chrono::milliseconds timeout_;
  std::vector<cudaEvent_t> ready_;  // per bucket: its last gradient is written (compute stream)
  cudaEvent_t reduced_ = nullptr;   // every bucket reduced (communication stream)
  std::vector<int> waiting_for_;
  std::vector<bool> started_;
  BucketHooks hooks_;
};

}  // namespace train::gpu
