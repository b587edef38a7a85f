// Samples from record files (TFRecord or MXNet RecordIO): sample i is index entry i. Loading reads the
// record with one pread (so threads never share a file position), checks it again (TFRecord: both
// checksums), finds the encoded image inside it (the tf.train.Example's image/encoded, or the bytes after
// the RecordIO image header) and decodes and augments it exactly as an image folder's file: the same
// image bytes give the same pixels whatever the container.
#pragma once

#include "runtime/data/records/record_index.h"
#include "runtime/data/sources/sample_source.h"

namespace train::data {

class RecordSource : public SampleSource {
 public:
  RecordSource(RecordIndex index, const ImageFolderOptions& options);
  int64_t size() const override { return index_.size(); }
  int num_classes() const override { return index_.num_classes; }
  const RecordIndex& index() const { return index_; }
  int32_t load(int64_t index, uint64_t seed, int64_t epoch, float* out, SampleScratch& scratch) const override;
  std::string describe() const override;
  std::string sample_name(int64_t index) const override;
  int64_t index_bytes() const override { return index_.bytes(); }

  // The encoded image of entry `index`, read and unwrapped as load() does (for tests and tools).
  std::vector<uint8_t> image_bytes(int64_t index) const;

 private:
  std::pair<const uint8_t*, size_t> unwrap(const RecordEntry& entry, std::vector<uint8_t>& record,
                                           std::vector<uint8_t>& reassembled) const;
  RecordIndex index_;
  ImageFolderOptions options_;
};

const char* record_format_name(RecordFormat format);

}  // namespace train::data
