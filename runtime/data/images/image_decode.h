// JPEG (libjpeg-turbo, through its libjpeg API) and PNG (libpng) into 8-bit RGB. Whatever the file holds
// becomes 3-channel RGB, as PIL's convert("RGB") does (what torchvision's ImageFolder loader calls):
// grayscale JPEGs are replicated, CMYK/YCCK JPEGs are converted assuming Adobe's inverted CMYK (as PIL
// assumes); PNG palettes are expanded, gray is replicated, alpha and tRNS transparency are dropped (not
// composited), 16-bit samples keep their high byte, low bit depths are scaled to 0-255.
// Every failure is a DataError whose message starts with the name given (the file's path).
#pragma once

#include "common/non_copyable.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace train::data {

struct RgbImage {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // height rows of width RGB triples, no padding
};

enum class ImageFormat { unknown, jpeg, png };

// By content (magic bytes), not by file name.
ImageFormat sniff_image_format(const uint8_t* data, size_t size);

// Reads a whole file into `bytes` (reusing its storage). Throws DataError "PATH: cannot read: REASON".
void read_file(const std::string& path, std::vector<uint8_t>& bytes);

// Decodes a whole JPEG or PNG held in memory; `name` is used in error messages.
RgbImage decode_image(const uint8_t* data, size_t size, const std::string& name);
RgbImage read_image(const std::string& path);

// Images larger than this many pixels are refused (a guard against decompression bombs).
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 28;

// A reusable JPEG decompressor (one per decoding thread) that can decode only a region of the image,
// optionally scaled down by 1/2, 1/4 or 1/8 in the DCT: the random-resized-crop path decodes only the
// rows and columns its resampling reads.
class JpegDecoder : private NonCopyable {
 public:
  JpegDecoder();
  ~JpegDecoder();

  // Reads the header of the JPEG in `data` (which must outlive decode()); after it width() and height()
  // give the image's size.
  void start(const uint8_t* data, size_t size, const std::string& name);
  int width() const { return width_; }
  int height() const { return height_; }

  // The size of the image decoded at scale eighths/8 (eighths = 1, 2, 4 or 8): ceil(size * eighths / 8).
  static int scaled_size(int size, int eighths) { return (size * eighths + 7) / 8; }

  struct Region {
    int x = 0;  // where the decoded pixels lie in the scaled image; x may be left of the requested x0,
    int y = 0;  // since libjpeg-turbo crops columns at iMCU boundaries
    int width = 0;
    int height = 0;
  };
  // Decodes columns [x0, x1) and rows [y0, y1) (of the image at scale eighths/8, clamped to it) into
  // `rgb` as rows of Region::width RGB triples, the pixels of [x0, x1) x [y0, y1) exactly as a full
  // decode at that scale gives them (the columns around them are not). `rgb` is grown as needed and
  // never shrunk, so it may hold more bytes than the region. Call once per start().
  Region decode(int eighths, int x0, int x1, int y0, int y1, std::vector<uint8_t>& rgb);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int width_ = 0;
  int height_ = 0;
  std::string name_;
};

// Decodes a whole PNG into `image` (reusing its storage).
void decode_png(const uint8_t* data, size_t size, const std::string& name, RgbImage& image);

}  // namespace train::data
