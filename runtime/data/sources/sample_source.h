// Where a batch's samples come from: an image folder or image list (decoded and augmented), record files
// (record_source.h, decoded the same way) or synthetic noise. A source turns (dataset index, seed, epoch)
// into one normalised NHWC float32 image and its label; it holds no mutable state, so any number of
// threads may load from one source, each with its own scratch.
#pragma once

#include "common/non_copyable.h"
#include "runtime/data/images/transform.h"
#include "runtime/data/loader_timing.h"
#include "runtime/data/sources/image_folder.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace train::data {

// Per-thread buffers (file bytes, decoded pixels, the JPEG decompressor), reused from sample to sample.
class SampleScratch : private NonCopyable {
 public:
  SampleScratch();
  ~SampleScratch();
  struct Buffers;
  Buffers& buffers() { return *buffers_; }
  // Corrupt samples this thread skipped (CorruptSkippingSource adds to it; the loader reads it).
  int64_t corrupt_skipped = 0;
  // Where the sources add each stage's time (StageTimer), while the loader times samples; null otherwise.
  SampleStageTimes* stage_times = nullptr;

 private:
  std::unique_ptr<Buffers> buffers_;
};

class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t size() const = 0;
  virtual int num_classes() const = 0;
  int height() const { return height_; }
  int width() const { return width_; }
  // Writes sample `index` of epoch `epoch` as height x width x 3 floats into `out`; returns its label.
  // The result depends only on (index, seed, epoch). Throws DataError naming the file on failure.
  virtual int32_t load(int64_t index, uint64_t seed, int64_t epoch, float* out, SampleScratch& scratch) const = 0;
  // What the log should say about this source.
  virtual std::string describe() const = 0;
  // Where sample `index` comes from, for a report about it (its file; a record's file and byte offset).
  virtual std::string sample_name(int64_t index) const;
  // The bytes the source's index of its samples holds (file names, record places, labels), counted from
  // its containers' capacities: what a data set's size costs every rank in memory. 0 for synthetic data.
  virtual int64_t index_bytes() const { return 0; }

 protected:
  SampleSource(int height, int width);
  int height_;
  int width_;
};

struct ImageFolderOptions {
  int height = 224;
  int width = 224;
  Augmentation augmentation = Augmentation::crop;
  // Decode a JPEG at 1/2, 1/4 or 1/8 scale in the DCT when the region to resample is at least that
  // many times larger than the output (as PIL's draft mode): much faster for large photos, slightly
  // different pixels from a full decode followed by resampling.
  bool jpeg_dct_scaling = true;
};

class ImageFolderSource : public SampleSource {
 public:
  ImageFolderSource(ImageFolder folder, const ImageFolderOptions& options);
  int64_t size() const override { return folder_.size(); }
  int num_classes() const override { return static_cast<int>(folder_.classes.size()); }
  const ImageFolder& folder() const { return folder_; }
  int32_t load(int64_t index, uint64_t seed, int64_t epoch, float* out, SampleScratch& scratch) const override;
  std::string describe() const override;
  std::string sample_name(int64_t index) const override;
  int64_t index_bytes() const override { return folder_.bytes(); }

 private:
  ImageFolder folder_;
  ImageFolderOptions options_;
};

// The common path of every encoded-image source: decodes the JPEG or PNG in `data` (only the region the
// crop needs, DCT-scaled when allowed), resamples it per `options` and the sample's `rng`, and writes
// options.height x options.width x 3 normalised floats to `out`. Throws DataError starting with `name`.
void decode_augment_normalise(const uint8_t* data, size_t size, const std::string& name,
                              const ImageFolderOptions& options, Rng& rng, SampleScratch& scratch, float* out);

// Per-thread buffers a source may read a file or a record into (reused from sample to sample).
std::vector<uint8_t>& scratch_bytes(SampleScratch& scratch);
std::vector<uint8_t>& scratch_spare_bytes(SampleScratch& scratch);

// Noise images for benchmarks: sample i's pixels are uniform random bytes and its label uniform in
// [0, num_classes), both drawn from (seed, i) alone (the same in every epoch), already at the input
// size, normalised like real images; no decoding and no augmentation.
class SyntheticSource : public SampleSource {
 public:
  SyntheticSource(int64_t samples, int num_classes, int height, int width);
  int64_t size() const override { return samples_; }
  int num_classes() const override { return num_classes_; }
  int32_t load(int64_t index, uint64_t seed, int64_t epoch, float* out, SampleScratch& scratch) const override;
  std::string describe() const override;

 private:
  int64_t samples_;
  int num_classes_;
};

// The key of sample `index`'s augmentation in `epoch`.
inline uint64_t sample_key(uint64_t seed, int64_t epoch, int64_t index) {
  return random_key(seed, RandomStream::sample_augmentation, static_cast<uint64_t>(epoch),
                    static_cast<uint64_t>(index));
}

}  // namespace train::data
