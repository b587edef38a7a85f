#include "runtime/data/sources/sample_source.h"

#include "runtime/data/data_error.h"
#include "runtime/data/images/image_decode.h"

#include <fmt/format.h>

#include <optional>
#include <stdexcept>
#include <utility>
#include <vector>

namespace train::data {

struct SampleScratch::Buffers {
  std::vector<uint8_t> file;
  std::vector<uint8_t> spare;     // a second byte buffer (a multi-part record reassembled)
  std::vector<uint8_t> decoded;  // a JPEG region
  RgbImage png;
  std::vector<uint8_t> resampled;
  ResampleScratch resample;
  AxisFilter fx, fy;
  JpegDecoder jpeg;
};

SampleScratch::SampleScratch() : buffers_(std::make_unique<Buffers>()) {}
SampleScratch::~SampleScratch() = default;

SampleSource::SampleSource(int height, int width) : height_(height), width_(width) {
  if (height < 1 || width < 1 || height > 8192 || width > 8192) {
    throw std::invalid_argument(fmt::format("input size {}x{}: expected 1 to 8192 pixels per side", height, width));
  }
}

ImageFolderSource::ImageFolderSource(ImageFolder folder, const ImageFolderOptions& options)
    : SampleSource(options.height, options.width), folder_(std::move(folder)), options_(options) {
  if (folder_.paths.empty()) throw DataError(fmt::format("{} {}: no images", folder_.kind, folder_.root));
}

std::string SampleSource::sample_name(int64_t index) const {
  return fmt::format("sample {} of {}", index, describe());
}

std::string ImageFolderSource::sample_name(int64_t index) const {
  if (index < 0 || index >= size()) return SampleSource::sample_name(index);
  return folder_.paths[static_cast<size_t>(index)];
}

std::string ImageFolderSource::describe() const {
  return fmt::format("{} {}: {} images in {} classes, augmentation {}, input {}x{}", folder_.kind, folder_.root,
                     folder_.size(), folder_.classes.size(), augmentation_name(options_.augmentation), height_,
                     width_);
}

namespace {

// The smallest DCT scale (eighths of full size) that keeps the resampled region at least as large as
// the output along both axes, so DCT scaling never forces an upscale.
int choose_dct_scale(const SampleGeometry& geometry) {
  const double sx = (geometry.x.in1 - geometry.x.in0) / geometry.x.out_size;
  const double sy = (geometry.y.in1 - geometry.y.in0) / geometry.y.out_size;
  const double shrink = std::min(sx, sy);
  for (int eighths : {1, 2, 4}) {
    if (shrink * eighths >= 8.0) return eighths;
  }
  return 8;
}

}  // namespace

std::vector<uint8_t>& scratch_bytes(SampleScratch& scratch) { return scratch.buffers().file; }
std::vector<uint8_t>& scratch_spare_bytes(SampleScratch& scratch) { return scratch.buffers().spare; }

void decode_augment_normalise(const uint8_t* data, size_t size, const std::string& name,
                              const ImageFolderOptions& options, Rng& rng, SampleScratch& scratch, float* out) {
  auto& b = scratch.buffers();
  const int height = options.height, width = options.width;
  RgbWindow window;
  SampleGeometry geometry;
  std::optional<StageTimer> decoding(std::in_place, scratch.stage_times, SampleStage::decode);
  switch (sniff_image_format(data, size)) {
    case ImageFormat::jpeg: {
      b.jpeg.start(data, size, name);
      geometry = plan_geometry(b.jpeg.height(), b.jpeg.width(), height, width, options.augmentation, rng);
      const int eighths = options.jpeg_dct_scaling ? choose_dct_scale(geometry) : 8;
      if (eighths != 8) {
        geometry.x = geometry.x.scaled(eighths, JpegDecoder::scaled_size(b.jpeg.width(), eighths));
        geometry.y = geometry.y.scaled(eighths, JpegDecoder::scaled_size(b.jpeg.height(), eighths));
      }
      compute_filter(geometry.x, b.fx);
      compute_filter(geometry.y, b.fy);
      const auto region =
          b.jpeg.decode(eighths, b.fx.need_lo, b.fx.need_hi, b.fy.need_lo, b.fy.need_hi, b.decoded);
      if (region.x > b.fx.need_lo || region.x + region.width < b.fx.need_hi || region.y > b.fy.need_lo ||
          region.y + region.height < b.fy.need_hi) {
        throw DataError(fmt::format("{}: the JPEG decoder returned a smaller region than asked for", name));
      }
      window = RgbWindow{b.decoded.data(), static_cast<size_t>(region.width) * 3, region.x, region.y};
      break;
    }
    case ImageFormat::png: {
      decode_png(data, size, name, b.png);
      geometry = plan_geometry(b.png.height, b.png.width, height, width, options.augmentation, rng);
      compute_filter(geometry.x, b.fx);
      compute_filter(geometry.y, b.fy);
      window = RgbWindow{b.png.pixels.data(), static_cast<size_t>(b.png.width) * 3, 0, 0};
      break;
    }
    case ImageFormat::unknown: {
      std::string start;
      for (size_t i = 0; i < size && i < 8; ++i) start += fmt::format("{}{:02x}", i ? " " : "", data[i]);
      throw DataError(fmt::format("{}: not a JPEG or PNG image ({})", name,
                                  size == 0 ? "it is empty" : "it starts with bytes " + start));
    }
  }
  decoding.reset();
  const StageTimer augmenting(scratch.stage_times, SampleStage::augment);
  // Drawn after the crop and flip, so crop_color's boxes are crop's.
  if (options.augmentation == Augmentation::crop_color) {
    const ColorJitter jitter = random_color_jitter(rng);
    resample_normalise(window, b.fx, b.fy, geometry.flip, b.resample, out, &jitter);
  } else {
    resample_normalise(window, b.fx, b.fy, geometry.flip, b.resample, out);
  }
}

int32_t ImageFolderSource::load(int64_t index, uint64_t seed, int64_t epoch, float* out,
                                SampleScratch& scratch) const {
  if (index < 0 || index >= size()) throw std::out_of_range(fmt::format("sample {} of {}", index, size()));
  const std::string& path = folder_.paths[static_cast<size_t>(index)];
  auto& bytes = scratch.buffers().file;
  {
    const StageTimer reading(scratch.stage_times, SampleStage::read);
    read_file(path, bytes);
  }
  Rng rng(sample_key(seed, epoch, index));
  decode_augment_normalise(bytes.data(), bytes.size(), path, options_, rng, scratch, out);
  return folder_.labels[static_cast<size_t>(index)];
}

SyntheticSource::SyntheticSource(int64_t samples, int num_classes, int height, int width)
    : SampleSource(height, width), samples_(samples), num_classes_(num_classes) {
  if (samples < 1) throw std::invalid_argument(fmt::format("synthetic data: expected at least 1 sample, got {}", samples));
  if (num_classes < 1) {
    throw std::invalid_argument(fmt::format("synthetic data: expected at least 1 class, got {}", num_classes));
  }
}

std::string SyntheticSource::describe() const {
  return fmt::format("synthetic data: {} random images in {} classes, input {}x{}", samples_, num_classes_, height_,
                     width_);
}

int32_t SyntheticSource::load(int64_t index, uint64_t seed, int64_t, float* out, SampleScratch& scratch) const {
  if (index < 0 || index >= samples_) throw std::out_of_range(fmt::format("sample {} of {}", index, samples_));
  Rng rng(random_key(seed, RandomStream::synthetic_image, static_cast<uint64_t>(index)));
  const auto label = static_cast<int32_t>(rng.below(static_cast<uint64_t>(num_classes_)));
  auto& pixels = scratch.buffers().resampled;
  const size_t bytes = static_cast<size_t>(height_) * width_ * 3;
  {
    const StageTimer making(scratch.stage_times, SampleStage::read);  // the noise stands for the file
    pixels.resize(bytes + 8);
    for (size_t i = 0; i < bytes; i += 8) {
      const uint64_t random = rng.next();
      for (int j = 0; j < 8; ++j) pixels[i + j] = static_cast<uint8_t>(random >> (8 * j));
    }
  }
  const StageTimer normalising(scratch.stage_times, SampleStage::augment);
  normalise_rgb(pixels.data(), width_, height_, false, out);
  return label;
}

}  // namespace train::data
