#include "runtime/data/sources/corrupt_skipping_source.h"

#include "runtime/data/data_error.h"

#include <fmt/format.h>

#include <stdexcept>

namespace train::data {

CorruptSkippingSource::CorruptSkippingSource(std::shared_ptr<const SampleSource> inner)
    : SampleSource(inner ? inner->height() : 1, inner ? inner->width() : 1), inner_(std::move(inner)) {
  if (!inner_) throw std::invalid_argument("corrupt-skipping source: no source to wrap");
}

int32_t CorruptSkippingSource::load(int64_t index, uint64_t seed, int64_t epoch, float* out,
                                    SampleScratch& scratch) const {
  const int64_t n = size();
  std::string first_error;
  const int attempts = static_cast<int>(std::min<int64_t>(n, kMaxConsecutiveFailures));
  for (int attempt = 0; attempt < attempts; ++attempt) {
    try {
      const int32_t label = inner_->load((index + attempt) % n, seed, epoch, out, scratch);
      scratch.corrupt_skipped += attempt;
      return label;
    } catch (const DataError& error) {
      if (attempt == 0) first_error = error.what();
    }
  }
  throw DataError(fmt::format("{} samples in a row from sample {} could not be loaded, so skip_corrupt gives up: the "
                              "data is probably not in the format detected; the first error: {}",
                              attempts, index, first_error));
}

}  // namespace train::data
