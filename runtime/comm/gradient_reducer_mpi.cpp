#include "runtime/comm/gradient_reducer_mpi.h"

#include "runtime/comm/mpi_check.h"

#include <fmt/format.h>

#include <thread>

namespace train::comm {

MpiGradientReducer::MpiGradientReducer(MPI_Comm comm, const std::vector<size_t>& tensor_elements,
                                       size_t fusion_threshold_bytes, std::chrono::milliseconds timeout)
    : GradientReducer(plan_gradient_buckets(tensor_elements, fusion_threshold_bytes)),
      comm_(comm),
      gradients_(plan().total_elements, 0.0f),
      timeout_(timeout) {
  requests_.assign(this->plan().buckets.size(), MPI_REQUEST_NULL);
  completed_.assign(this->plan().buckets.size(), 0);
}

MpiGradientReducer::~MpiGradientReducer() {
  // A step abandoned by an exception leaves requests in flight; they cannot be cancelled, only completed
  // or left to MPI_Abort. Nothing here may throw.
  for (auto& request : requests_) {
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
}

void MpiGradientReducer::start_bucket(size_t bucket) {
  const auto& range = plan().buckets[bucket];
  bucket_started(bucket);
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, gradients_.data() + range.begin, static_cast<int>(range.end - range.begin),
                           MPI_FLOAT, MPI_SUM, comm_, &requests_[bucket]));
}

// MPI_Testsome rather than MPI_Testall: it frees each request as it completes, so the hooks learn when each
// bucket did; it progresses the others just the same.
bool MpiGradientReducer::test_requests() {
  int count = 0;
  MPI_CHECK(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, completed_.data(),
                         MPI_STATUSES_IGNORE));
  if (count == MPI_UNDEFINED) return true;  // none was in flight
  for (int i = 0; i < count; ++i) bucket_finished(static_cast<size_t>(completed_[static_cast<size_t>(i)]));
  for (auto request : requests_) {
    if (request != MPI_REQUEST_NULL) return false;
  }
  return true;
}

void MpiGradientReducer::progress() { test_requests(); }

void MpiGradientReducer::finish_buckets() {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  while (true) {
    if (test_requests()) return;
    if (std::chrono::steady_clock::now() > deadline) {
      size_t pending = 0;
      for (auto request : requests_) pending += request != MPI_REQUEST_NULL ? 1 : 0;
      throw CollectiveTimeout(fmt::format("the gradient allreduce did not complete within {} s ({} of {} buckets pending): "
                                 "another rank is stuck or gone; set TRAIN_STEP_TIMEOUT_SECONDS to allow longer",
                                 std::chrono::duration_cast<std::chrono::seconds>(timeout_).count(), pending,
                                 requests_.size()));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace train::comm
