#include "runtime/data/image_decode.h"
#include "runtime/data/sample_source.h"
#include "runtime/data/transform.h"
#include "test_data_helpers.h"

#include <catch2/catch.hpp>

#include <cmath>

using namespace train::data;
using train::data::testing::TempDir;
using train::data::testing::test_pixels;

namespace {

std::vector<float> normalised(const std::vector<uint8_t>& rgb) {
  std::vector<float> out(rgb.size());
  for (size_t i = 0; i < rgb.size(); ++i) out[i] = normalised_value(static_cast<int>(i % 3), rgb[i]);
  return out;
}

// The crop [top, top+h) x [left, left+w) of an RGB image.
std::vector<uint8_t> crop(const std::vector<uint8_t>& rgb, int width, int top, int left, int h, int w) {
  std::vector<uint8_t> out;
  for (int y = top; y < top + h; ++y) {
    for (int x = left; x < left + w; ++x) {
      for (int c = 0; c < 3; ++c) out.push_back(rgb[(static_cast<size_t>(y) * width + x) * 3 + c]);
    }
  }
  return out;
}

// A plain double-precision reference of PIL's antialiased bilinear resize (no fixed point, no
// intermediate rounding): results may differ from ours by 1.
std::vector<double> reference_resize(const std::vector<uint8_t>& rgb, int width, int height, int out_width,
                                     int out_height) {
  auto weights = [](int in_size, int out_size, int o, int& first) {
    const double scale = static_cast<double>(in_size) / out_size;
    const double support = std::max(scale, 1.0);
    const double center = (o + 0.5) * scale;
    first = std::max(0, static_cast<int>(center - support + 0.5));
    const int last = std::min(in_size, static_cast<int>(center + support + 0.5));
    std::vector<double> w;
    double total = 0;
    for (int x = first; x < last; ++x) {
      const double t = std::abs((x - center + 0.5) / support);
      w.push_back(t < 1 ? 1 - t : 0);
      total += w.back();
    }
    for (double& v : w) v /= total;
    return w;
  };
  std::vector<double> horizontal(static_cast<size_t>(height) * out_width * 3);
  for (int y = 0; y < height; ++y) {
    for (int o = 0; o < out_width; ++o) {
      int first;
      const auto w = weights(width, out_width, o, first);
      for (int c = 0; c < 3; ++c) {
        double sum = 0;
        for (size_t t = 0; t < w.size(); ++t) sum += w[t] * rgb[(static_cast<size_t>(y) * width + first + t) * 3 + c];
        horizontal[(static_cast<size_t>(y) * out_width + o) * 3 + c] = sum;
      }
    }
  }
  std::vector<double> out(static_cast<size_t>(out_height) * out_width * 3);
  for (int o = 0; o < out_height; ++o) {
    int first;
    const auto w = weights(height, out_height, o, first);
    for (int x = 0; x < out_width * 3; ++x) {
      double sum = 0;
      for (size_t t = 0; t < w.size(); ++t) sum += w[t] * horizontal[(first + t) * out_width * 3 + x];
      out[static_cast<size_t>(o) * out_width * 3 + x] = sum;
    }
  }
  return out;
}

std::vector<float> load(const SampleSource& source, int64_t index, uint64_t seed = 0, int64_t epoch = 0) {
  std::vector<float> out(static_cast<size_t>(source.height()) * source.width() * 3);
  SampleScratch scratch;
  source.load(index, seed, epoch, out.data(), scratch);
  return out;
}

ImageFolderSource folder_source(const TempDir& dir, int size, Augmentation augmentation) {
  ImageFolderOptions options;
  options.height = options.width = size;
  options.augmentation = augmentation;
  return ImageFolderSource(scan_image_folder(dir / "root"), options);
}

}  // namespace

TEST_CASE("normalisation: [0,1] then ImageNet mean and standard deviation, in float32", "[data]") {
  // Within a few ulps of torchvision's step-by-step float32 formula.
  for (int c = 0; c < 3; ++c) {
    for (int p = 0; p < 256; ++p) {
      const float formula = (static_cast<float>(p) / 255.0f - kImageNetMean[c]) / kImageNetStd[c];
      REQUIRE(std::abs(normalised_value(c, static_cast<uint8_t>(p)) - formula) <= 4e-7f * std::max(1.0f, std::abs(formula)));
    }
  }
  CHECK(normalised_value(0, 0) == Approx(-2.1179039));
  CHECK(normalised_value(0, 255) == Approx(2.2489083));
  CHECK(normalised_value(1, 255) == Approx(2.4285714));
  CHECK(normalised_value(2, 255) == Approx(2.64));
  CHECK(normalised_value(2, 0) == Approx(-1.8044444));
  CHECK(normalised_value(1, 128) == Approx((128.0 / 255.0 - 0.456) / 0.224));

  const std::vector<uint8_t> rgb = {255, 0, 128, 1, 2, 3};
  std::vector<float> out(6);
  normalise_rgb(rgb.data(), 2, 1, false, out.data());
  CHECK(out == normalised(rgb));
  normalise_rgb(rgb.data(), 2, 1, true, out.data());  // mirrored
  CHECK(out == normalised({1, 2, 3, 255, 0, 128}));
}

TEST_CASE("augmentation none: an image of the input size passes unchanged", "[data]") {
  TempDir dir;
  dir.mkdir("root/c");
  const auto pixels = test_pixels(32, 32, 3, 1);
  testing::write_png_rgb(dir / "root/c/a.png", 32, 32, pixels);
  testing::write_jpeg(dir / "root/c/b.jpg", 32, 32, 2);
  const auto source = folder_source(dir, 32, Augmentation::none);
  CHECK(load(source, 0) == normalised(pixels));
  CHECK(load(source, 1) == normalised(read_image(dir / "root/c/b.jpg").pixels));
}

TEST_CASE("augmentation none: the shorter side is resized to the input size, then centre-cropped", "[data]") {
  TempDir dir;
  dir.mkdir("root/c");
  const auto wide = test_pixels(48, 32, 3, 1);   // shorter side already 32: a pure centre crop
  const auto tall = test_pixels(32, 45, 3, 2);   // (45 - 32) / 2 = 6.5 rounds half to even: top 6
  const auto big = test_pixels(64, 96, 3, 3);    // resized to 32 x 48, then rows 8..40
  testing::write_png_rgb(dir / "root/c/1.png", 48, 32, wide);
  testing::write_png_rgb(dir / "root/c/2.png", 32, 45, tall);
  testing::write_png_rgb(dir / "root/c/3.png", 64, 96, big);
  const auto source = folder_source(dir, 32, Augmentation::none);
  CHECK(load(source, 0) == normalised(crop(wide, 48, 0, 8, 32, 32)));
  CHECK(load(source, 1) == normalised(crop(tall, 32, 6, 0, 32, 32)));

  const auto got = load(source, 2);
  const auto reference = reference_resize(big, 64, 96, 32, 48);
  int worst = 0;
  for (int y = 0; y < 32; ++y) {
    for (int x = 0; x < 32 * 3; ++x) {
      const double expected = reference[static_cast<size_t>(y + 8) * 32 * 3 + x];
      // Back from the normalised value to 0-255.
      const int c = x % 3;
      const double value = (got[static_cast<size_t>(y) * 32 * 3 + x] * kImageNetStd[c] + kImageNetMean[c]) * 255.0;
      worst = std::max(worst, static_cast<int>(std::ceil(std::abs(value - expected) - 1e-3)));
    }
  }
  CHECK(worst <= 1);
}

TEST_CASE("resample: a constant image stays constant at any scale", "[data]") {
  const std::vector<uint8_t> pixels(50 * 40 * 3, 77);
  Rng rng(1);
  for (auto [oh, ow] : {std::pair{224, 224}, std::pair{7, 9}, std::pair{40, 50}}) {
    for (auto augmentation : {Augmentation::none, Augmentation::crop}) {
      const auto geometry = plan_geometry(40, 50, oh, ow, augmentation, rng);
      AxisFilter fx, fy;
      compute_filter(geometry.x, fx);
      compute_filter(geometry.y, fy);
      ResampleScratch scratch;
      std::vector<uint8_t> out(static_cast<size_t>(oh) * ow * 3);
      resample_rgb(RgbWindow{pixels.data(), 50 * 3, 0, 0}, fx, fy, scratch, out.data());
      CHECK(out == std::vector<uint8_t>(out.size(), 77));
    }
  }
}

TEST_CASE("random resized crop: torchvision's boxes", "[data]") {
  Rng rng(42);
  int fallbacks = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int h = 100 + static_cast<int>(rng.below(500)), w = 100 + static_cast<int>(rng.below(500));
    const auto box = random_resized_crop_box(h, w, rng);
    REQUIRE(box.top >= 0);
    REQUIRE(box.left >= 0);
    REQUIRE(box.height >= 1);
    REQUIRE(box.width >= 1);
    REQUIRE(box.top + box.height <= h);
    REQUIRE(box.left + box.width <= w);
    const double area = static_cast<double>(box.height) * box.width / (static_cast<double>(h) * w);
    const double ratio = static_cast<double>(box.width) / box.height;
    if (area > 0.999 && box.top == 0 && box.left == 0) ++fallbacks;
    // The box's sides are rounded to whole pixels, so area and ratio stray a little out of range.
    CHECK(area >= 0.07);
    CHECK(area <= 1.0);
    CHECK(ratio >= 0.72);
    CHECK(ratio <= 1.39);
  }
  CHECK(fallbacks < 400);
  // A strip too thin for any box in range: every attempt fails, the fallback is the centred 4:3 box.
  const auto box = random_resized_crop_box(10, 1000, rng);
  CHECK(box.height == 10);
  CHECK(box.width == 13);  // round(10 * 4/3)
  CHECK(box.top == 0);
  CHECK(box.left == (1000 - 13) / 2);
  const auto tall = random_resized_crop_box(1000, 10, rng);
  CHECK(tall.width == 10);
  CHECK(tall.height == 13);  // round(10 / (3/4)) = round(13.33)
  CHECK(tall.top == (1000 - 13) / 2);
}

TEST_CASE("augmentation crop: deterministic per (seed, epoch, index), varied otherwise, flips half", "[data]") {
  TempDir dir;
  dir.mkdir("root/c");
  testing::write_jpeg(dir / "root/c/a.jpg", 120, 90, 1);
  testing::write_png(dir / "root/c/b.png", 90, 120, 2);
  const auto source = folder_source(dir, 24, Augmentation::crop);
  for (int64_t index : {0, 1}) {
    CHECK(load(source, index, 7, 3) == load(source, index, 7, 3));
    CHECK(load(source, index, 7, 3) != load(source, index, 7, 4));  // another epoch
    CHECK(load(source, index, 7, 3) != load(source, index, 8, 3));  // another seed
  }
  int flips = 0;
  for (int64_t epoch = 0; epoch < 200; ++epoch) {
    Rng rng(sample_key(0, epoch, 0));
    flips += plan_geometry(90, 120, 24, 24, Augmentation::crop, rng).flip;
  }
  CHECK(flips > 70);
  CHECK(flips < 130);
}

TEST_CASE("augmentation crop: with DCT scaling close to the full decode", "[data]") {
  TempDir dir;
  dir.mkdir("root/c");
  testing::write_jpeg(dir / "root/c/a.jpg", 640, 480, 1);
  ImageFolderOptions options;
  options.height = options.width = 32;
  options.augmentation = Augmentation::none;  // 480 -> 32: decoded at 1/8 scale
  const ImageFolderSource scaled(scan_image_folder(dir / "root"), options);
  options.jpeg_dct_scaling = false;
  const ImageFolderSource full(scan_image_folder(dir / "root"), options);
  const auto a = load(scaled, 0), b = load(full, 0);
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  CHECK(worst < 12.0 / 255 / 0.224);  // within a dozen levels
}
