#include "runtime/data/data_error.h"
#include "runtime/data/images/image_decode.h"
#include "tests/unit/test_data_helpers.h"

#include <catch2/catch.hpp>

#include <cstdlib>

using namespace train::data;
using train::data::testing::TempDir;
using train::data::testing::test_pixels;

namespace {

int max_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  int worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(int{a[i]} - int{b[i]}));
  return worst;
}

RgbImage decode(const std::vector<uint8_t>& bytes) { return decode_image(bytes.data(), bytes.size(), "test"); }

PngImage png(int width, int height, PngColor color, int bit_depth, std::vector<uint16_t> samples) {
  PngImage image;
  image.width = width;
  image.height = height;
  image.color = color;
  image.bit_depth = bit_depth;
  image.samples = std::move(samples);
  return image;
}

}  // namespace

TEST_CASE("decode: RGB JPEG and PNG files written with libjpeg and libpng", "[data]") {
  TempDir dir;
  const auto pixels = test_pixels(37, 23, 3, 7);
  write_file(dir / "a.jpg", encode_jpeg(pixels.data(), 37, 23, 3, {.quality = 100, .subsampling = ChromaSubsampling::s444}));
  testing::write_png_rgb(dir / "a.png", 37, 23, pixels);

  const auto jpeg = read_image(dir / "a.jpg");
  CHECK(jpeg.width == 37);
  CHECK(jpeg.height == 23);
  CHECK(max_difference(jpeg.pixels, pixels) <= 4);  // lossy, but at quality 100 without subsampling: close

  const auto png_image = read_image(dir / "a.png");
  CHECK(png_image.width == 37);
  CHECK(png_image.height == 23);
  CHECK(png_image.pixels == pixels);  // lossless

  // A progressive JPEG holds the same quantised coefficients as a baseline one: the same pixels.
  const JpegEncodeOptions baseline{.quality = 95, .subsampling = ChromaSubsampling::s420};
  JpegEncodeOptions progressive = baseline;
  progressive.progressive = true;
  const auto a = encode_jpeg(pixels.data(), 37, 23, 3, baseline), b = encode_jpeg(pixels.data(), 37, 23, 3, progressive);
  CHECK(a != b);
  CHECK(decode(a).pixels == decode(b).pixels);
}

TEST_CASE("decode: grayscale and CMYK JPEGs become RGB", "[data]") {
  const auto gray = test_pixels(16, 9, 1, 3);
  const auto image = decode(encode_jpeg(gray.data(), 16, 9, 1, {.quality = 100}));
  REQUIRE(image.pixels.size() == 16 * 9 * 3);
  for (size_t i = 0; i < gray.size(); ++i) {
    CHECK(image.pixels[3 * i] == image.pixels[3 * i + 1]);
    CHECK(image.pixels[3 * i] == image.pixels[3 * i + 2]);
    CHECK(std::abs(int{image.pixels[3 * i]} - int{gray[i]}) <= 2);
  }

  // Adobe (inverted) CMYK: stored (255 - C, 255 - M, 255 - Y, 255 - K). Pure red is C=0 M=255 Y=255 K=0;
  // 50% gray is C=M=Y=0, K=128.
  std::vector<uint8_t> cmyk;
  for (int i = 0; i < 8 * 8; ++i) {
    const bool red = i < 32;
    for (uint8_t v : red ? std::vector<uint8_t>{255, 0, 0, 255} : std::vector<uint8_t>{255, 255, 255, 127}) cmyk.push_back(v);
  }
  const auto rgb = decode(encode_jpeg(cmyk.data(), 8, 8, 4, {.quality = 100}));
  REQUIRE(rgb.pixels.size() == 8 * 8 * 3);
  CHECK(std::abs(int{rgb.pixels[0]} - 255) <= 3);
  CHECK(rgb.pixels[1] <= 3);
  CHECK(rgb.pixels[2] <= 3);
  const uint8_t* gray_pixel = rgb.pixels.data() + 63 * 3;
  for (int c = 0; c < 3; ++c) CHECK(std::abs(int{gray_pixel[c]} - 127) <= 3);
}

TEST_CASE("decode: every PNG colour type becomes 8-bit RGB", "[data]") {
  SECTION("8-bit gray") {
    const auto image = decode(encode_png(png(3, 1, PngColor::gray, 8, {0, 128, 255})));
    CHECK(image.pixels == std::vector<uint8_t>{0, 0, 0, 128, 128, 128, 255, 255, 255});
  }
  SECTION("1-bit and 4-bit gray scale to 0-255") {
    CHECK(decode(encode_png(png(3, 1, PngColor::gray, 1, {0, 1, 0}))).pixels ==
          std::vector<uint8_t>{0, 0, 0, 255, 255, 255, 0, 0, 0});
    CHECK(decode(encode_png(png(2, 1, PngColor::gray, 4, {1, 15}))).pixels ==
          std::vector<uint8_t>{17, 17, 17, 255, 255, 255});
  }
  SECTION("16-bit gray and RGB keep the high byte") {
    CHECK(decode(encode_png(png(2, 1, PngColor::gray, 16, {0x1234, 0xFFFF}))).pixels ==
          std::vector<uint8_t>{0x12, 0x12, 0x12, 0xFF, 0xFF, 0xFF});
    CHECK(decode(encode_png(png(1, 1, PngColor::rgb, 16, {0x0102, 0x8000, 0xFEFF}))).pixels ==
          std::vector<uint8_t>{0x01, 0x80, 0xFE});
  }
  SECTION("alpha is dropped, not composited") {
    CHECK(decode(encode_png(png(1, 1, PngColor::gray_alpha, 8, {200, 0}))).pixels ==
          std::vector<uint8_t>{200, 200, 200});
    CHECK(decode(encode_png(png(2, 1, PngColor::rgba, 8, {10, 20, 30, 0, 40, 50, 60, 255}))).pixels ==
          std::vector<uint8_t>{10, 20, 30, 40, 50, 60});
    CHECK(decode(encode_png(png(1, 1, PngColor::rgba, 16, {0xAA00, 0xBB00, 0xCC00, 0x1234}))).pixels ==
          std::vector<uint8_t>{0xAA, 0xBB, 0xCC});
  }
  SECTION("palette, with transparency ignored") {
    auto image = png(3, 1, PngColor::palette, 2, {2, 0, 1});
    image.palette = {255, 0, 0, 0, 255, 0, 0, 0, 255};
    image.transparency = {0, 128};
    CHECK(decode(encode_png(image)).pixels == std::vector<uint8_t>{0, 0, 255, 255, 0, 0, 0, 255, 0});
  }
  SECTION("interlaced") {
    const auto pixels = test_pixels(11, 7, 3, 5);
    auto image = png(11, 7, PngColor::rgb, 8, std::vector<uint16_t>(pixels.begin(), pixels.end()));
    image.interlaced = true;
    CHECK(decode(encode_png(image)).pixels == pixels);
  }
}

TEST_CASE("decode: a JPEG region (cropped, skipped, DCT-scaled) equals that part of the full decode", "[data]") {
  const int width = 131, height = 97;
  const auto pixels = test_pixels(width, height, 3, 11);
  struct Case {
    const char* name;
    int components;
    JpegEncodeOptions options;
  };
  const Case cases[] = {
      {"4:2:0", 3, {.quality = 90, .subsampling = ChromaSubsampling::s420}},
      {"4:2:2", 3, {.quality = 90, .subsampling = ChromaSubsampling::s422}},
      {"4:4:4", 3, {.quality = 90, .subsampling = ChromaSubsampling::s444}},
      {"progressive 4:2:0", 3, {.quality = 90, .progressive = true}},
      {"gray", 1, {.quality = 90}},
  };
  train::data::Rng rng(5);
  for (const auto& c : cases) {
    INFO(c.name);
    const auto source = c.components == 1 ? test_pixels(width, height, 1, 11) : pixels;
    const auto bytes = encode_jpeg(source.data(), width, height, c.components, c.options);
    for (int eighths : {8, 4, 2, 1}) {
      JpegDecoder decoder;
      const int sw = JpegDecoder::scaled_size(width, eighths), sh = JpegDecoder::scaled_size(height, eighths);
      std::vector<uint8_t> full;
      decoder.start(bytes.data(), bytes.size(), "full");
      const auto whole = decoder.decode(eighths, 0, sw, 0, sh, full);
      REQUIRE(whole.width == sw);
      REQUIRE(whole.height == sh);
      for (int trial = 0; trial < 20; ++trial) {
        const int x0 = static_cast<int>(rng.below(sw)), y0 = static_cast<int>(rng.below(sh));
        const int x1 = x0 + 1 + static_cast<int>(rng.below(sw - x0)), y1 = y0 + 1 + static_cast<int>(rng.below(sh - y0));
        std::vector<uint8_t> part;
        decoder.start(bytes.data(), bytes.size(), "part");
        const auto region = decoder.decode(eighths, x0, x1, y0, y1, part);
        INFO("eighths " << eighths << " region x " << x0 << ".." << x1 << " y " << y0 << ".." << y1 << " got x "
                        << region.x << " width " << region.width);
        REQUIRE(region.x <= x0);
        REQUIRE(region.x + region.width >= x1);
        REQUIRE(region.y == y0);
        REQUIRE(region.height == y1 - y0);
        int mismatches = 0;
        for (int y = y0; y < y1; ++y) {
          for (int x = x0; x < x1; ++x) {
            for (int ch = 0; ch < 3; ++ch) {
              mismatches += part[((y - region.y) * region.width + (x - region.x)) * 3 + ch] !=
                            full[(static_cast<size_t>(y) * sw + x) * 3 + ch];
            }
          }
        }
        REQUIRE(mismatches == 0);
      }
    }
  }
}

TEST_CASE("decode: broken files fail with the name and the reason", "[data]") {
  TempDir dir;
  SECTION("not an image") {
    write_file(dir / "notes.jpg", {'h', 'e', 'l', 'l', 'o'});
    REQUIRE_THROWS_AS(read_image(dir / "notes.jpg"), DataError);
    REQUIRE_THROWS_WITH(read_image(dir / "notes.jpg"),
                        Catch::StartsWith(dir / "notes.jpg") && Catch::Contains("not a JPEG or PNG") &&
                            Catch::Contains("68 65 6c 6c 6f"));
  }
  SECTION("empty") {
    write_file(dir / "empty.png", {});
    REQUIRE_THROWS_WITH(read_image(dir / "empty.png"), Catch::Contains("empty.png") && Catch::Contains("empty"));
  }
  SECTION("corrupt JPEG") {
    write_file(dir / "bad.jpg", {0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x02, 0x13, 0x37, 0x00, 0x00});
    REQUIRE_THROWS_WITH(read_image(dir / "bad.jpg"),
                        Catch::StartsWith(dir / "bad.jpg") && Catch::Contains("not a decodable JPEG"));
  }
  SECTION("truncated JPEG") {
    auto bytes = encode_jpeg(test_pixels(64, 64, 3, 1).data(), 64, 64, 3);
    bytes.resize(bytes.size() / 2);
    write_file(dir / "half.jpg", bytes);
    REQUIRE_THROWS_WITH(read_image(dir / "half.jpg"), Catch::Contains("half.jpg") && Catch::Contains("truncated"));
  }
  SECTION("truncated and corrupt PNG") {
    auto bytes = encode_png(png(16, 16, PngColor::gray, 8, std::vector<uint16_t>(256, 7)));
    auto truncated = bytes;
    truncated.resize(truncated.size() - 20);
    write_file(dir / "cut.png", truncated);
    REQUIRE_THROWS_WITH(read_image(dir / "cut.png"), Catch::Contains("cut.png") && Catch::Contains("not a decodable PNG"));
    bytes[20] ^= 0xFF;  // inside IHDR: its CRC no longer matches
    write_file(dir / "crc.png", bytes);
    REQUIRE_THROWS_WITH(read_image(dir / "crc.png"), Catch::Contains("crc.png") && Catch::Contains("not a decodable PNG"));
  }
  SECTION("unreadable") {
    REQUIRE_THROWS_WITH(read_image(dir / "gone.png"),
                        Catch::Contains("gone.png") && Catch::Contains("cannot open") &&
                            Catch::Contains("No such file"));
  }
}
