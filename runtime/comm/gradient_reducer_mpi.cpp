#include "runtime/comm/gradient_reducer_mpi.h"

#include "runtime/comm/mpi_check.h"

#include <fmt/format.h>

#include <thread>

namespace train {

MpiGradientReducer::MpiGradientReducer(MPI_Comm comm, BucketPlan plan, float* gradients,
                                       std::chrono::milliseconds timeout)
    : comm_(comm), plan_(std::move(plan)), gradients_(gradients), timeout_(timeout) {
  requests_.assign(plan_.buckets.size(), MPI_REQUEST_NULL);
  started_.assign(plan_.buckets.size(), false);
  completed_.assign(plan_.buckets.size(), 0);
  begin_step();
}

MpiGradientReducer::~MpiGradientReducer() {
  // A step abandoned by an exception leaves requests in flight; they cannot be cancelled, only completed
  // or left to MPI_Abort. Nothing here may throw.
  for (auto& request : requests_) {
    if (request != MPI_REQUEST_NULL) MPI_Request_free(&request);
  }
}

void MpiGradientReducer::begin_step() {
  waiting_for_.resize(plan_.buckets.size());
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    waiting_for_[b] = static_cast<int>(plan_.buckets[b].tensors.size());
    started_[b] = false;
  }
}

void MpiGradientReducer::tensor_ready(int tensor) {
  const int bucket = plan_.bucket_of_tensor.at(static_cast<size_t>(tensor));
  if (--waiting_for_[static_cast<size_t>(bucket)] != 0) return;
  const auto& range = plan_.buckets[static_cast<size_t>(bucket)];
  if (hooks_) hooks_.started(static_cast<size_t>(bucket), plan_.bytes(static_cast<size_t>(bucket)));
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, gradients_ + range.begin, static_cast<int>(range.end - range.begin),
                           MPI_FLOAT, MPI_SUM, comm_, &requests_[static_cast<size_t>(bucket)]));
  started_[static_cast<size_t>(bucket)] = true;
}

// MPI_Testsome rather than MPI_Testall: it frees each request as it completes, so the hooks learn when each
// bucket did; it progresses the others just the same.
bool MpiGradientReducer::test_requests() {
  int count = 0;
  MPI_CHECK(MPI_Testsome(static_cast<int>(requests_.size()), requests_.data(), &count, completed_.data(),
                         MPI_STATUSES_IGNORE));
  if (count == MPI_UNDEFINED) return true;  // none was in flight
  if (hooks_) {
    for (int i = 0; i < count; ++i) {
      const auto bucket = static_cast<size_t>(completed_[static_cast<size_t>(i)]);
      hooks_.finished(bucket, plan_.bytes(bucket));
    }
  }
  for (auto request : requests_) {
    if (request != MPI_REQUEST_NULL) return false;
  }
  return true;
}

void MpiGradientReducer::progress() { test_requests(); }

void MpiGradientReducer::finish() {
  for (size_t b = 0; b < started_.size(); ++b) {
    if (!started_[b]) {
      throw MpiError(fmt::format("gradient bucket {} was never started: backward did not report all of its {} "
                                 "tensors (a bug in the model)",
                                 b, plan_.buckets[b].tensors.size()));
    }
  }
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

}  // namespace train
