#include "runtime/comm/gradient_buckets.h"

#include <algorithm>
#include <stdexcept>

namespace train::comm {

BucketPlan plan_buckets(const std::vector<size_t>& tensor_elements, size_t fusion_threshold_bytes,
                        size_t first_bucket_bytes, size_t element_bytes) {
  if (element_bytes == 0) throw std::invalid_argument("plan_buckets: element_bytes must be positive");
  BucketPlan plan;
  plan.element_bytes = element_bytes;
  const size_t count = tensor_elements.size();
  plan.offset_of_tensor.assign(count, 0);
  plan.bucket_of_tensor.assign(count, -1);
  size_t end = 0;  // the end of the last tensor placed
  BucketPlan::Bucket current;
  size_t capacity = std::max<size_t>(1, std::min(first_bucket_bytes, fusion_threshold_bytes));
  for (size_t reverse = 0; reverse < count; ++reverse) {
    const int tensor = static_cast<int>(count - 1 - reverse);
    const size_t elements = tensor_elements[static_cast<size_t>(tensor)];
    size_t offset = aligned_tensor_offset(end);
    if (!current.tensors.empty() && (offset + elements - current.begin) * element_bytes > capacity) {
      plan.buckets.push_back(current);
      current = BucketPlan::Bucket{};
      capacity = std::max<size_t>(1, fusion_threshold_bytes);
    }
    if (current.tensors.empty()) current.begin = offset;
    plan.offset_of_tensor[static_cast<size_t>(tensor)] = offset;
    plan.bucket_of_tensor[static_cast<size_t>(tensor)] = static_cast<int>(plan.buckets.size());
    current.tensors.push_back(tensor);
    end = offset + elements;
    current.end = end;
  }
  if (!current.tensors.empty()) plan.buckets.push_back(current);
  plan.total_elements = aligned_tensor_offset(end);
  return plan;
}

}  // namespace train::comm
