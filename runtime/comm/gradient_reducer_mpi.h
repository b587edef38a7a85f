// Summing gradient buckets across ranks with non-blocking MPI allreduces (the CPU backend's
// communication); the countdown that decides when a bucket starts is GradientReducer's
// (runtime/comm/gradient_reducer.h). It plans the buckets and owns the flat buffer they cut; the model
// writes its gradients into it through gradients() (runtime/comm/gradient_buckets.h: GradientViews).
// Gradients arrive already divided by the number of ranks (the loss gradient is scaled once at the start of
// backward), so the sum is the average: no separate averaging pass.
#pragma once

#include "runtime/comm/gradient_reducer.h"

#include <mpi.h>

#include <chrono>
#include <vector>

namespace train::comm {

class MpiGradientReducer final : public GradientReducer {
 public:
  // Buckets of `fusion_threshold_bytes` over tensors of `tensor_elements` (forward order), and their buffer
  // (zero). `timeout` bounds finish(): a rank that never joins turns into an error naming the bucket instead
  // of a hung job.
  MpiGradientReducer(MPI_Comm comm, const std::vector<size_t>& tensor_elements, size_t fusion_threshold_bytes,
                     std::chrono::milliseconds timeout);
  ~MpiGradientReducer() override;

  // Where the model writes its gradients: the buffer the buckets reduce in place.
  GradientViews<float> gradients() { return GradientViews<float>{gradients_.data(), &plan()}; }

  // Gives started reductions a chance to progress (Open MPI moves non-blocking collectives only inside
  // MPI calls); cheap, call it between layers. finish() waits for every bucket; it throws MpiError on
  // failure, CollectiveTimeout past the timeout.
  void progress();

 private:
  // The hooks' `started` right before the bucket's MPI_Iallreduce.
  void start_bucket(size_t bucket) override;
  void finish_buckets() override;
  // Tests every request in flight; true when none is left. Tells the hooks of each one that completed
  // (`finished`, when the host sees it).
  bool test_requests();

  MPI_Comm comm_;
  std::vector<float> gradients_;  // plan().total_elements
  std::chrono::milliseconds timeout_;
  std::vector<MPI_Request> requests_;  // per bucket; MPI_REQUEST_NULL when not started or done
  std::vector<int> completed_;         // MPI_Testsome's indices
};

}  // namespace train::comm
