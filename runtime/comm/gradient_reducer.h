// What every gradient reducer does the same way, kept in one place (as PyTorch DDP's Reducer and Horovod's
// fusion buffer manager keep it apart from the collectives): the bucket plan (runtime/comm/gradient_buckets.h),
// the countdown of each bucket's tensors within a step, the bucket's preparation, the timeline's hooks
// (runtime/comm/bucket_hooks.h) and the check that every bucket was started before the step's wait.
//
// A step: begin_step(), then tensor_ready(p) for every parameter as backward writes its gradient (in any
// order; each once); the call that reports a bucket's last tensor runs the bucket's preparation (when one
// was given) and starts its reduction; then finish() waits for every bucket. A backend (the MPI reducer on
// the CPU, the NCCL reducer on the GPU) says only how a bucket's reduction starts (start_bucket) and how the
// step waits for them (finish_buckets), and tells the hooks when its buckets start and finish.
#pragma once

#include "common/non_copyable.h"
#include "runtime/comm/bucket_hooks.h"
#include "runtime/comm/gradient_buckets.h"

#include <cstddef>
#include <functional>
#include <vector>

namespace train::comm {

class GradientReducer : private NonCopyable {
 public:
  // Runs as a bucket completes, before its reduction starts, with the bucket's elements [begin, end) of the
  // flat buffer (the CUDA engine widens the bucket's bf16 gradients into the fp32 buffer there).
  using Prepare = std::function<void(size_t begin, size_t end)>;

  virtual ~GradientReducer() = default;

  // Every bucket waits for all its tensors again.
  void begin_step();
  // Backward has written the gradient of parameter `tensor` (forward numbering); the bucket's reduction
  // starts with its last tensor.
  void tensor_ready(int tensor);
  // Waits for every bucket of the step (the backend's wait: runtime/comm/gradient_reducer_mpi.h,
  // gradient_reducer_nccl.h). Throws std::logic_error when a bucket never received all its tensors (a bug
  // in the model that reports them), before waiting for anything.
  void finish();

  const BucketPlan& plan() const { return plan_; }
  // The timeline's hooks; empty hooks turn them off.
  void set_bucket_hooks(BucketHooks hooks) { hooks_ = std::move(hooks); }

 protected:
  explicit GradientReducer(BucketPlan plan, Prepare prepare = {});

  // Starts the reduction of `bucket`, whose gradients are all written (and prepared).
  virtual void start_bucket(size_t bucket) = 0;
  // Every bucket has been started: waits for them all (or, on a device, makes the compute stream wait).
  virtual void finish_buckets() = 0;

  // The backend tells the hooks (when set) as it starts and sees finish each bucket's reduction.
  void bucket_started(size_t bucket) const;
  void bucket_finished(size_t bucket) const;

 private:
  BucketPlan plan_;
  Prepare prepare_;
  BucketHooks hooks_;
  std::vector<int> waiting_for_;  // per bucket: its tensors not yet ready this step
};

}  // namespace train::comm
