#include "runtime/comm/gradient_buckets.h"

#include <algorithm>

namespace train {

BucketPlan plan_buckets(const std::vector<size_t>& tensor_elements, size_t threshold_bytes,
                        size_t first_bucket_bytes) {
  BucketPlan plan;
  const size_t count = tensor_elements.size();
  plan.offset_of_tensor.assign(count, 0);
  plan.bucket_of_tensor.assign(count, -1);
  size_t offset = 0;
  BucketPlan::Bucket current;
  size_t limit = std::max<size_t>(1, std::min(first_bucket_bytes, threshold_bytes));
  for (size_t reverse = 0; reverse < count; ++reverse) {
    const int tensor = static_cast<int>(count - 1 - reverse);
    const size_t bytes = tensor_elements[static_cast<size_t>(tensor)] * sizeof(float);
    const size_t current_bytes = (current.end - current.begin) * sizeof(float);
    if (!current.tensors.empty() && current_bytes + bytes > limit) {
      plan.buckets.push_back(current);
      current = BucketPlan::Bucket{offset, offset, {}};
      limit = std::max<size_t>(1, threshold_bytes);
    }
    plan.offset_of_tensor[static_cast<size_t>(tensor)] = offset;
    plan.bucket_of_tensor[static_cast<size_t>(tensor)] = static_cast<int>(plan.buckets.size());
    current.tensors.push_back(tensor);
    offset += tensor_elements[static_cast<size_t>(tensor)];
    current.end = offset;
  }
  if (!current.tensors.empty()) plan.buckets.push_back(current);
  plan.total_elements = offset;
  return plan;
}

}  // namespace train
