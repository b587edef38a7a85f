// Summing gradient buckets across ranks with non-blocking MPI allreduces (the CPU backend's
// communication). Gradients arrive already divided by the number of ranks (the loss gradient is scaled
// once at the start of backward), so the sum is the average: no separate averaging pass.
#pragma once

#include "runtime/comm/bucket_hooks.h"
#include "runtime/comm/gradient_buckets.h"

#include <mpi.h>

#include <chrono>
#include <vector>

namespace train {

class MpiGradientReducer {
 public:
  // `gradients` is the flat buffer the plan describes. `timeout` bounds finish(): a rank that never joins
  // turns into an error naming the bucket instead of a hung job.
  MpiGradientReducer(MPI_Comm comm, BucketPlan plan, float* gradients, std::chrono::milliseconds timeout);
  ~MpiGradientReducer();
  MpiGradientReducer(const MpiGradientReducer&) = delete;
  MpiGradientReducer& operator=(const MpiGradientReducer&) = delete;

  void begin_step();
  // Backward has written the gradient of parameter `tensor`; the bucket's allreduce starts with its last.
  void tensor_ready(int tensor);
  // Gives started reductions a chance to progress (Open MPI moves non-blocking collectives only inside
  // MPI calls); cheap, call it between layers.
  void progress();
  // Waits for every bucket. Throws MpiError on failure or timeout.
  void finish();

  const BucketPlan& plan() const { return plan_; }
  // The timeline's hooks (runtime/comm/bucket_hooks.h); empty hooks turn them off.
  void set_bucket_hooks(BucketHooks hooks) { hooks_ = std::move(hooks); }

 private:
  // Tests every request in flight; true when none is left. Tells the hooks of each one that completed.
  bool test_requests();

  MPI_Comm comm_;
  BucketPlan plan_;
  float* gradients_;
  std::chrono::milliseconds timeout_;
  std::vector<int> waiting_for_;       // tensors still missing per bucket
  std::vector<MPI_Request> requests_;  // per bucket; MPI_REQUEST_NULL when not started or done
  std::vector<bool> started_;
  std::vector<int> completed_;  // MPI_Testsome's indices
  BucketHooks hooks_;
};

}  // namespace train
