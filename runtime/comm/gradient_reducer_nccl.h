// Summing gradient buckets across ranks with NCCL, the GPU twin of MpiGradientReducer: the same bucket
// plan over one flat fp32 device buffer of gradients, the same countdown (runtime/comm/gradient_reducer.h).
// It plans the buckets and holds the buffer they cut (in device memory its owner lends it); the model's
// optimizer reads the reduced gradients there (GpuResNet: its fp32 gradients are that buffer, its bf16 ones
// are widened into it). When backward has written a bucket's last gradient, the bucket's preparation (the
// caller's: widening bf16 gradients into the fp32 buffer) is enqueued on the compute stream, then an event
// recorded there lets the communication stream start that bucket's ncclAllReduce (averaging over ranks)
// while backward goes on with the next layers; finish() makes the compute stream wait for the last
// reduction, so the optimizer that follows on the compute stream sees averaged gradients. Nothing here waits
// on the host inside a step.
#pragma once

#include "runtime/comm/gradient_reducer.h"
#include "runtime/comm/nccl_communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <functional>
#include <vector>

namespace train::comm {

class NcclGradientReducer final : public GradientReducer {
 public:
  // What its owner lends it on the device, all of it owned by kernels/cuda/handles.h (runtime/comm/
  // includes of kernels/ only its call check): the streams it enqueues on, the events that order them, and the memory
  // of its buffer. Backward writes the gradients on `compute`; the reductions run on `communication` (best
  // at the device's highest priority, so that the small, latency-bound collectives start as soon as their
  // bucket is ready). `ready` is recorded on `compute` as each bucket completes and waited for by
  // `communication` right away (one event serves every bucket: a wait takes the record made before it);
  // `reduced` the other way round, by finish(). `allocate(bytes)` returns device memory that lives as long as
  // the reducer (called once, by the constructor).
  struct Device {
    cudaStream_t compute = nullptr;
    cudaStream_t communication = nullptr;
    cudaEvent_t ready = nullptr;
    cudaEvent_t reduced = nullptr;
    std::function<void*(size_t bytes)> allocate;
  };

  // Buckets of `fusion_threshold_bytes` over tensors of `tensor_elements` (forward order), and their fp32
  // buffer (its contents are the model's to set: GpuResNet zeroes it). `op` ncclAvg averages in the
  // reduction (use ncclSum when the loss gradient is already divided by the number of ranks). `timeout`
  // bounds the host's waits for a non-blocking communicator. `prepare`, when given, is enqueued on the
  // compute stream as each bucket completes, before the bucket's reduction waits for that stream.
  NcclGradientReducer(const NcclCommunicator& comm, const std::vector<size_t>& tensor_elements,
                      size_t fusion_threshold_bytes, Device device, std::chrono::milliseconds timeout,
                      ncclRedOp_t op = ncclAvg, Prepare prepare = {});

  // Where the gradients are reduced (device memory): what the model's optimizer reads.
  GradientViews<float> gradients() { return GradientViews<float>{gradients_, &plan()}; }

  // finish() enqueues the compute stream's wait for every bucket; it throws GpuError when NCCL fails.
  // Host-side bounded wait for this step's reductions (tests): NcclCommunicator::wait_for_event.
  void wait(std::chrono::milliseconds timeout) const;

 private:
  // Enqueued on the communication stream: its wait for the compute stream, the hooks' `started`, the
  // ncclAllReduce, the hooks' `finished` (hooks record device timestamps there, in stream order).
  void start_bucket(size_t bucket) override;
  void finish_buckets() override;

  const NcclCommunicator& comm_;
  Device device_;
  float* gradients_;  // plan().total_elements, lent by device_.allocate
  ncclRedOp_t op_;
  std::chrono::milliseconds timeout_;
};

}  // namespace train::comm
