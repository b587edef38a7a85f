// Writing JPEG and PNG files: for tests (images of every colour type the decoders must handle) and for
// the data benchmark's generated photos. Not used in training.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace train::data {

enum class ChromaSubsampling { s444, s422, s420 };

struct JpegEncodeOptions {
  int quality = 90;
  ChromaSubsampling subsampling = ChromaSubsampling::s420;
  bool progressive = false;
};

// `pixels`: height rows of width samples of `components` bytes: 1 grayscale, 3 RGB, 4 CMYK (stored as
// given; Adobe's convention is inverted CMYK). Throws std::runtime_error on failure.
std::vector<uint8_t> encode_jpeg(const uint8_t* pixels, int width, int height, int components,
                                 const JpegEncodeOptions& options = {});

enum class PngColor { gray, gray_alpha, rgb, rgba, palette };

struct PngImage {
  int width = 0;
  int height = 0;
  PngColor color = PngColor::rgb;
  int bit_depth = 8;                  // 1, 2, 4, 8 or 16 as PNG allows for the colour type
  std::vector<uint16_t> samples;      // height x width x channels, each in [0, 2^bit_depth)
  std::vector<uint8_t> palette;       // palette: RGB triples
  std::vector<uint8_t> transparency;  // palette: optional tRNS alpha per entry
  bool interlaced = false;
};

std::vector<uint8_t> encode_png(const PngImage& image);

void write_file(const std::string& path, const std::vector<uint8_t>& bytes);

}  // namespace train::data
