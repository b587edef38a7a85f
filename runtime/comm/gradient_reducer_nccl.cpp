#include "runtime/comm/gradient_reducer_nccl.h"

#include "runtime/comm/nccl_check.h"

#include <fmt/format.h>

namespace train::gpu {

namespace {

size_t bytes_of(ncclDataType_t type) {
  switch (type) {
    case ncclFloat32: return 4;
    case ncclBfloat16:
    case ncclFloat16: return 2;
    default: throw GpuError("NCCL gradient reducer: gradients must be float32, bfloat16 or float16");
  }
}

}  // namespace

NcclGradientReducer::NcclGradientReducer(const NcclCommunicator& comm, BucketPlan plan, void* gradients,
                                         ncclDataType_t type, cudaStream_t compute, std::chrono::milliseconds timeout,
                                         ncclRedOp_t op, Prepare prepare)
    : GradientReducer(std::move(plan), std::move(prepare)),
      comm_(comm),
      gradients_(static_cast<char*>(gradients)),
      element_bytes_(bytes_of(type)),
      type_(type),
      op_(op),
      compute_(compute),
      timeout_(timeout) {
  if (element_bytes_ != this->plan().element_bytes) {
    throw GpuError(fmt::format("NCCL gradient reducer: the buckets were sized for {}-byte elements, the buffer holds "
                               "{}-byte ones",
                               this->plan().element_bytes, element_bytes_));
  }
  // Its own stream, so reductions overlap the compute stream's backward; a higher priority lets the
  // small, latency-bound collectives start as soon as their bucket is ready.
  int least = 0, greatest = 0;
  TRAIN_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  TRAIN_CUDA_CHECK(cudaStreamCreateWithPriority(&comm_stream_, cudaStreamNonBlocking, greatest));
  ready_.resize(this->plan().buckets.size());
  for (auto& event : ready_) TRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  TRAIN_CUDA_CHECK(cudaEventCreateWithFlags(&reduced_, cudaEventDisableTiming));
}

NcclGradientReducer::~NcclGradientReducer() {
  // Errors are ignored here: the device may be in an error state after a failure, and this must not throw.
  for (auto& event : ready_) cudaEventDestroy(event);
  if (reduced_ != nullptr) cudaEventDestroy(reduced_);
  if (comm_stream_ != nullptr) cudaStreamDestroy(comm_stream_);
}

void NcclGradientReducer::start_bucket(size_t bucket) {
  const auto& b = plan().buckets[bucket];
  TRAIN_CUDA_CHECK(cudaEventRecord(ready_[bucket], compute_));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, ready_[bucket], 0));
  bucket_started(bucket);
  char* data = gradients_ + b.begin * element_bytes_;
  const ncclResult_t result = ncclAllReduce(data, data, b.end - b.begin, type_, op_, comm_.get(), comm_stream_);
  if (result == ncclInProgress) {
    comm_.wait_ready(timeout_, "enqueueing a gradient bucket's allreduce");
  } else if (result != ncclSuccess) {
    throw_nccl_error(result, "ncclAllReduce (gradient bucket)", __FILE__, __LINE__);
  }
  bucket_finished(bucket);
}

void NcclGradientReducer::finish_buckets() {
  TRAIN_CUDA_CHECK(cudaEventRecord(reduced_, comm_stream_));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(compute_, reduced_, 0));
}

void NcclGradientReducer::wait(std::chrono::milliseconds timeout) const {
  comm_.wait_for_event(reduced_, timeout, "the step's gradient allreduces");
}

}  // namespace train::gpu
