// Gradient buckets: every parameter's gradient lives in one flat buffer laid out in
// reverse forward order (the order backward produces them), cut into buckets of about the fusion threshold
// (fusion_threshold_mb) in bytes, the first one small so communication starts early. A tensor is never
// split; one larger than the threshold is a bucket of its own. When backward has produced every gradient of
// a bucket, its allreduce starts while backward goes on.
//
// The communication layer owns the plan and the buffer (a reducer, or a GradientBuffer where nothing is
// reduced); a model writes its gradients through GradientViews into it, as PyTorch DDP's
// gradient_as_bucket_view makes each parameter's .grad a view into its bucket. So the fusion threshold goes
// one way: the job's settings -> the reducer, which plans the buckets -> the model, which writes where the
// plan says.
//
// Every tensor starts at a multiple of tensor_alignment_elements: cuDNN, cuBLAS and vectorised kernels are
// handed pointers into this buffer, and packing tensors back to back would offset every one after the
// classifier's bias by num_classes elements (2-byte aligned in bf16 for 37 or 101 classes). The padding
// between tensors is never written and stays zero, so reducing it changes nothing.
#pragma once

#include <cstddef>
#include <utility>
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

// `tensor_elements` in forward order. A bucket holds at most `fusion_threshold_bytes` (the first one
// `first_bucket_bytes`) of elements of `element_bytes` each, padding between its tensors included, unless
// it is a single tensor larger than that.
BucketPlan plan_buckets(const std::vector<size_t>& tensor_elements, size_t fusion_threshold_bytes,
                        size_t first_bucket_bytes, size_t element_bytes);

// The training job's buckets: `fusion_threshold_bytes` each, the first one 1 MiB so that the first
// allreduce starts right after the classifier's gradients. Both engines reduce fp32 gradients (the GPU's
// bf16 gradients are widened before their reduction: the NCCL reducer's preparation), so the thresholds
// count 4-byte elements. Both models' gradients are laid out by it.
inline constexpr size_t first_gradient_bucket_bytes = size_t{1} << 20;
inline constexpr size_t reduced_gradient_bytes = 4;
inline BucketPlan plan_gradient_buckets(const std::vector<size_t>& tensor_elements, size_t fusion_threshold_bytes) {
  return plan_buckets(tensor_elements, fusion_threshold_bytes, first_gradient_bucket_bytes, reduced_gradient_bytes);
}

// Where a model writes its gradients: parameter p's at `values` + plan->offset_of_tensor[p], in a buffer of
// plan->total_elements values that its owner (a reducer, a GradientBuffer) keeps for as long as the model.
template <typename T>
struct GradientViews {
  T* values = nullptr;
  const BucketPlan* plan = nullptr;
  size_t elements() const { return plan->total_elements; }
};

// The flat gradient buffer and its plan where no reducer owns them: one process's gradients (checks of the
// model, benchmarks, the float64 reference model).
template <typename T>
class GradientBuffer {
 public:
  GradientBuffer(const std::vector<size_t>& tensor_elements, size_t fusion_threshold_bytes)
      : GradientBuffer(plan_gradient_buckets(tensor_elements, fusion_threshold_bytes)) {}
  explicit GradientBuffer(BucketPlan plan) : plan_(std::move(plan)), values_(plan_.total_elements, T(0)) {}
  // Not copied or moved: models hold views into it.
  GradientBuffer(const GradientBuffer&) = delete;
  GradientBuffer& operator=(const GradientBuffer&) = delete;

  const BucketPlan& plan() const { return plan_; }
  const std::vector<T>& values() const { return values_; }
  GradientViews<T> views() { return GradientViews<T>{values_.data(), &plan_}; }

 private:
  BucketPlan plan_;
  std::vector<T> values_;  // zero, padding included, until a model writes its gradients
};

}  // namespace train::comm
