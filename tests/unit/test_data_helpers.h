// Helpers shared by the data pipeline's tests (tests/unit/runtime/data/) and others that need images:
// temporary folders and generated images.
#pragma once

#include "runtime/data/random.h"
#include "tests/support/image_encode.h"
#include "tests/unit/temp_folder.h"

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace train::data::testing {

// A throw-away folder with shorthands for the paths in it.
class TempDir : public train::testing::TempFolder {
 public:
  TempDir() : TempFolder("train-data-test") {}
  std::string operator/(const std::string& name) const { return (path() / name).string(); }
  std::string mkdir(const std::string& name) const {
    std::filesystem::create_directories(path() / name);
    return (path() / name).string();
  }
};

// Smooth gradients plus a little noise (compresses like a photo; no flat areas).
inline std::vector<uint8_t> test_pixels(int width, int height, int channels, uint64_t seed) {
  Rng rng(seed);
  std::vector<uint8_t> pixels(static_cast<size_t>(width) * height * channels);
  const int a = static_cast<int>(rng.below(5)) + 1, b = static_cast<int>(rng.below(5)) + 1;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < channels; ++c) {
        const int value = (x * 255 / std::max(1, width - 1)) * (c % 2 ? a : 1) + (y * 255 / std::max(1, height - 1)) * b +
                          c * 60 + static_cast<int>(rng.below(9));
        pixels[(static_cast<size_t>(y) * width + x) * channels + c] = static_cast<uint8_t>(value % 256);
      }
    }
  }
  return pixels;
}

inline void write_jpeg(const std::string& path, int width, int height, uint64_t seed, JpegEncodeOptions options = {}) {
  write_file(path, encode_jpeg(test_pixels(width, height, 3, seed).data(), width, height, 3, options));
}

inline void write_png_rgb(const std::string& path, int width, int height, const std::vector<uint8_t>& rgb) {
  PngImage image;
  image.width = width;
  image.height = height;
  image.color = PngColor::rgb;
  image.samples.assign(rgb.begin(), rgb.end());
  write_file(path, encode_png(image));
}

inline void write_png(const std::string& path, int width, int height, uint64_t seed) {
  write_png_rgb(path, width, height, test_pixels(width, height, 3, seed));
}

}  // namespace train::data::testing
