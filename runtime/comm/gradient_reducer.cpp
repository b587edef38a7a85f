#include "runtime/comm/gradient_reducer.h"

#include <fmt/format.h>

#include <stdexcept>

namespace train::comm {

GradientReducer::GradientReducer(BucketPlan plan, Prepare prepare)
    : plan_(std::move(plan)), prepare_(std::move(prepare)) {
  begin_step();
}

void GradientReducer::begin_step() {
  waiting_for_.resize(plan_.buckets.size());
  for (size_t b = 0; b < plan_.buckets.size(); ++b) waiting_for_[b] = static_cast<int>(plan_.buckets[b].tensors.size());
}

void GradientReducer::tensor_ready(int tensor) {
  const auto bucket = static_cast<size_t>(plan_.bucket_of_tensor.at(static_cast<size_t>(tensor)));
  if (--waiting_for_[bucket] != 0) return;
  if (prepare_) prepare_(plan_.buckets[bucket].begin, plan_.buckets[bucket].end);
  start_bucket(bucket);
}

void GradientReducer::finish() {
  for (size_t b = 0; b < plan_.buckets.size(); ++b) {
    if (waiting_for_[b] > 0) {
      throw std::logic_error(fmt::format("gradient bucket {} of {} was never started: backward reported {} of its {} "
                                         "tensors (a bug in the model)",
                                         b, plan_.buckets.size(),
                                         static_cast<int>(plan_.buckets[b].tensors.size()) - waiting_for_[b],
                                         plan_.buckets[b].tensors.size()));
    }
  }
  finish_buckets();
}

void GradientReducer::bucket_started(size_t bucket) const {
  if (hooks_) hooks_.started(bucket, plan_.bytes(bucket));
}

void GradientReducer::bucket_finished(size_t bucket) const {
  if (hooks_) hooks_.finished(bucket, plan_.bytes(bucket));
}

}  // namespace train::comm
