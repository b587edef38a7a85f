#include "runtime/comm/gradient_reducer_nccl.h"

#include "kernels/cuda/cuda_check.h"
#include "runtime/comm/nccl_check.h"


namespace train::comm {

NcclGradientReducer::NcclGradientReducer(const NcclCommunicator& comm, const std::vector<size_t>& tensor_elements,
                                         size_t fusion_threshold_bytes, Device device,
                                         std::chrono::milliseconds timeout, ncclRedOp_t op, Prepare prepare)
    : GradientReducer(plan_gradient_buckets(tensor_elements, fusion_threshold_bytes), std::move(prepare)),
      comm_(comm),
      device_(std::move(device)),
      gradients_(nullptr),
      op_(op),
      timeout_(timeout) {
  if (device_.compute == nullptr || device_.communication == nullptr || device_.ready == nullptr ||
      device_.reduced == nullptr || !device_.allocate) {
    throw GpuError("NCCL gradient reducer: it needs a compute and a communication stream, two events and memory");
  }
  gradients_ = static_cast<float*>(device_.allocate(sizeof(float) * plan().total_elements));
}

void NcclGradientReducer::start_bucket(size_t bucket) {
  const auto& b = plan().buckets[bucket];
  TRAIN_CUDA_CHECK(cudaEventRecord(device_.ready, device_.compute));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(device_.communication, device_.ready, 0));
  bucket_started(bucket);
  float* data = gradients_ + b.begin;
  const ncclResult_t result =
      ncclAllReduce(data, data, b.end - b.begin, ncclFloat32, op_, comm_.get(), device_.communication);
  if (result == ncclInProgress) {
    comm_.wait_ready(timeout_, "enqueueing a gradient bucket's allreduce");
  } else if (result != ncclSuccess) {
    throw_nccl_error(result, "ncclAllReduce (gradient bucket)", __FILE__, __LINE__);
  }
  bucket_finished(bucket);
}

void NcclGradientReducer::finish_buckets() {
  TRAIN_CUDA_CHECK(cudaEventRecord(device_.reduced, device_.communication));
  TRAIN_CUDA_CHECK(cudaStreamWaitEvent(device_.compute, device_.reduced, 0));
}

void NcclGradientReducer::wait(std::chrono::milliseconds timeout) const {
  comm_.wait_for_event(device_.reduced, timeout, "the step's gradient allreduces");
}

}  // namespace train::comm
