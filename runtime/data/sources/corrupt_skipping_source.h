// skip_corrupt=true for samples whose damage shows only when they are loaded (an undecodable image, a
// record changed since indexing): wraps a source and, when sample i fails with a DataError, loads sample
// i+1 (then i+2, ...) in its place, so a batch keeps its size and the result still depends only on
// (index, seed, epoch). Each skipped sample is added to SampleScratch::corrupt_skipped, which the batch
// loader sums per batch. After 64 failures in a row it gives up: the data is then in the wrong format,
// not damaged here and there.
#pragma once

#include "runtime/data/sources/sample_source.h"

#include <memory>

namespace train::data {

class CorruptSkippingSource : public SampleSource {
 public:
  explicit CorruptSkippingSource(std::shared_ptr<const SampleSource> inner);
  int64_t size() const override { return inner_->size(); }
  int num_classes() const override { return inner_->num_classes(); }
  int32_t load(int64_t index, uint64_t seed, int64_t epoch, float* out, SampleScratch& scratch) const override;
  std::string describe() const override { return inner_->describe() + ", corrupt samples skipped"; }
  std::string sample_name(int64_t index) const override { return inner_->sample_name(index); }
  int64_t index_bytes() const override { return inner_->index_bytes(); }
  const SampleSource& inner() const { return *inner_; }

  static constexpr int kMaxConsecutiveFailures = 64;

 private:
  std::shared_ptr<const SampleSource> inner_;
};

}  // namespace train::data
