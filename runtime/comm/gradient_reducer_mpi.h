// Summing gradient buckets across ranks with non-blocking MPI allreduces (the CPU backend's
// communication); the countdown that decides when a bucket starts is GradientReducer's
// (runtime/comm/gradient_reducer.h). Gradients arrive already divided by the number of ranks (the loss
// gradient is scaled once at the start of backward), so the sum is the average: no separate averaging pass.
#pragma once

#include "runtime/comm/gradient_reducer.h"

#include <mpi.h>

#include <chrono>
#include <vector>

namespace train::comm {

class MpiGradientReducer final : public GradientReducer {
 public:
  // `gradients` is the flat buffer the plan describes. `timeout` bounds finish(): a rank that never joins
  // turns into an error naming the bucket instead of a hung job.
  MpiGradientReducer(MPI_Comm comm, BucketPlan plan, float* gradients, std::chrono::milliseconds timeout);
  ~MpiGradientReducer() override;

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
  float* gradients_;
  std::chrono::milliseconds timeout_;
  std::vector<MPI_Request> requests_;  // per bucket; MPI_REQUEST_NULL when not started or done
  std::vector<int> completed_;         // MPI_Testsome's indices
};

}  // namespace train::comm
