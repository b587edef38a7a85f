// Gradient buckets: every parameter's gradient lives in one flat buffer laid out in
// reverse forward order (the order backward produces them), cut into buckets of about `threshold` bytes,
// the first one small so communication starts early. A tensor is never split; one larger than the
// threshold is a bucket of its own. When backward has produced every gradient of a bucket, its allreduce
// starts while backward goes on.
//
// Every tensor starts at a multiple of tensor_alignment_elements: cuDNN, cuBLAS and vectorised kernels are
// handed pointers into this buffer, and packing tensors back to back would offset every one after the
// classifier's bias by num_classes elements (2-byte aligned in bf16 for 37 or 101 classes). The padding
// between tensors is never written and stays zero, so reducing it changes nothing.
#pragma once

#include <cstddef>
#include <vector>

namespace train::comm {

// 128 elements: 256 bytes of bf16, 512 of fp32, so a tensor is 256-byte aligned (what cudaMalloc gives and
// cuDNN's fastest paths want) in a buffer of either type that starts so aligned. The models' parameter
// stores use the same alignment (runtime/model/resnet_plan.h).
inline constexpr size_t tensor_alignment_elements = 128;

// `offset` rounded up to a multiple of tensor_alignment_elements.
constexpr size_t aligned_tensor_offset(size_t offset) {
  return (offset + tensor_alignment_elements - 1) / tensor_alignment_elements * tensor_alignment_elements;
}

struct BucketPlan {
  struct Bucket {
    size_t begin = 0;  // element offsets in the flat buffer: its first tensor's offset, its last tensor's end
    size_t end = 0;
    std::vector<int> tensors;  // parameter indices (forward order numbering)
  };
  std::vector<size_t> offset_of_tensor;  // flat-buffer element offset of each parameter, by forward index
  std::vector<int> bucket_of_tensor;
  std::vector<Bucket> buckets;          // in the order they complete (reverse forward)
  size_t total_elements = 0;            // the buffer's size, padding included
  size_t element_bytes = 4;             // of the elements the reduction sends (what the thresholds count)
  // The bytes bucket `b`'s reduction sends.
  size_t bytes(size_t b) const { return (buckets[b].end - buckets[b].begin) * element_bytes; }
};

// `tensor_elements` in forward order. A bucket holds at most `threshold_bytes` (the first one
// `first_bucket_bytes`) of elements of `element_bytes` each, padding between its tensors included, unless
// it is a single tensor larger than that.
BucketPlan plan_buckets(const std::vector<size_t>& tensor_elements, size_t threshold_bytes, size_t first_bucket_bytes,
                        size_t element_bytes);

// The training job's buckets: `fusion_threshold` bytes each, the first one 1 MiB so that the first
// allreduce starts right after the classifier's gradients. Both engines reduce fp32 gradients (the GPU's
// bf16 gradients are widened before their reduction: runtime/cuda_engine.cpp), so the thresholds count
// 4-byte elements. Both models' gradients are laid out by it.
inline constexpr size_t first_gradient_bucket_bytes = size_t{1} << 20;
inline constexpr size_t reduced_gradient_bytes = 4;
inline BucketPlan plan_gradient_buckets(const std::vector<size_t>& tensor_elements, size_t threshold_bytes) {
  return plan_buckets(tensor_elements, threshold_bytes, first_gradient_bucket_bytes, reduced_gradient_bytes);
}

}  // namespace train::comm
