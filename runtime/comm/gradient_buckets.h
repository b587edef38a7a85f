// Gradient buckets: every parameter's gradient lives in one flat buffer laid out in
// reverse forward order (the order backward produces them), cut into buckets of about `threshold` bytes,
// the first one small so communication starts early. A tensor is never split; one larger than the
// threshold is a bucket of its own. When backward has produced every gradient of a bucket, its allreduce
// starts while backward goes on.
#pragma once

#include <cstddef>
#include <vector>

namespace train {

struct BucketPlan {
  struct Bucket {
    size_t begin = 0;  // element offsets in the flat buffer
    size_t end = 0;
    std::vector<int> tensors;  // parameter indices (forward order numbering)
  };
  std::vector<size_t> offset_of_tensor;  // flat-buffer element offset of each parameter, by forward index
  std::vector<int> bucket_of_tensor;
  std::vector<Bucket> buckets;          // in the order they complete (reverse forward)
  size_t total_elements = 0;
};

// `tensor_elements` in forward order. `threshold_bytes` and `first_bucket_bytes` are for float32 elements.
BucketPlan plan_buckets(const std::vector<size_t>& tensor_elements, size_t threshold_bytes,
                        size_t first_bucket_bytes);

// The training job's buckets: `fusion_threshold` bytes each, the first one 1 MiB so that the first
// allreduce starts right after the classifier's gradients. Both models' gradients are laid out by it.
inline constexpr size_t first_gradient_bucket_bytes = size_t{1} << 20;
inline BucketPlan plan_gradient_buckets(const std::vector<size_t>& tensor_elements, size_t threshold_bytes) {
  return plan_buckets(tensor_elements, threshold_bytes, first_gradient_bucket_bytes);
}

}  // namespace train
