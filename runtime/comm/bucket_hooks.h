// What the timeline (runtime/timeline/) sees of the gradient reducers: each bucket's reduction as it starts
// and ends, with its bytes. Both reducers take the same hooks (set_bucket_hooks); unset hooks cost nothing.
//
// The MPI reducer calls `started` right before the bucket's MPI_Iallreduce and `finished` when the host
// sees it complete (reducers test their requests between backward layers and in finish()). The NCCL reducer
// calls both while enqueueing, in stream order on its communication stream: `started` after the stream's
// wait for the bucket's gradients and before its ncclAllReduce, `finished` after it; a hook there records
// a device timestamp on the communication stream, never the host's clock.
#pragma once

#include <cstddef>
#include <functional>

namespace train::comm {

struct BucketHooks {
  std::function<void(size_t bucket, size_t bytes)> started;
  std::function<void(size_t bucket, size_t bytes)> finished;
  explicit operator bool() const { return started && finished; }
};

}  // namespace train::comm
