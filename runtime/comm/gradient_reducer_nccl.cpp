#include "runtime/comm/gradient_reducer_nccl.h"

#include "runtime/comm/nccl_check.h"

#include <fmt/format.h>

namespace train::comm {

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
                                         ncclDataType_t type, Streams streams, std::chrono::milliseconds timeout,
                                         ncclRedOp_t op, Prepare prepare)
    : GradientReducer(std::move(plan), std::move(prepare)),
      comm_(comm),
      gradients_(static_cast<char*>(gradients)),
      element_bytes_(bytes_of(type)),
      type_(type),
      op_(op),
      streams_(streams),
      timeout_(timeout) {
  if (element_bytes_ != this->plan().element_bytes) {
    throw GpuError(fmt::format("NCCL gradient reducer: the buckets were sized for {}-byte elements, the buffer holds "
                               "{}-byte ones",
                               this->plan().element_bytes, element_bytes_));
  }
  if (streams_.compute == nullptr || streams_.communication == nullptr || streams_.ready == nullptr ||
      streams_.reduced == nullptr) {
    throw GpuError("NCCL gradient reducer: it needs a compute and a communication stream and two events");
  }
}

void NcclGradientReducer::start_bucket(size_t bucket) {
  const auto& b = plan().buckets[bucket];
  TRAIN_CUDA_CHECK(cudaEventRecord(streams_.ready, streams_.compute));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(streams_.communication, streams_.ready, 0));
  bucket_started(bucket);
  char* data = gradients_ + b.begin * element_bytes_;
  const ncclResult_t result =
      ncclAllReduce(data, data, b.end - b.begin, type_, op_, comm_.get(), streams_.communication);
  if (result == ncclInProgress) {
    comm_.wait_ready(timeout_, "enqueueing a gradient bucket's allreduce");
  } else if (result != ncclSuccess) {
    throw_nccl_error(result, "ncclAllReduce (gradient bucket)", __FILE__, __LINE__);
  }
  bucket_finished(bucket);
}

void NcclGradientReducer::finish_buckets() {
  TRAIN_CUDA_CHECK(cudaEventRecord(streams_.reduced, streams_.communication));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(streams_.compute, streams_.reduced, 0));
}

void NcclGradientReducer::wait(std::chrono::milliseconds timeout) const {
  comm_.wait_for_event(streams_.reduced, timeout, "the step's gradient allreduces");
}

}  // namespace train::comm
