#include "runtime/data/images/image_decode.h"
#include "runtime/data/images/transform.h"
#include "runtime/data/sources/sample_source.h"
#include "tests/unit/test_data_helpers.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

using train::Augmentation;
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

namespace {

uint64_t fnv1a(uint64_t hash, const std::vector<float>& values) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

struct Resampled {
  SampleGeometry geometry;
  AxisFilter fx, fy;
};

// The geometry and filters of one sample of `augmentation` on a height x width image.
Resampled plan(int height, int width, int out_height, int out_width, Augmentation augmentation, Rng& rng) {
  Resampled r;
  r.geometry = plan_geometry(height, width, out_height, out_width, augmentation, rng);
  compute_filter(r.geometry.x, r.fx);
  compute_filter(r.geometry.y, r.fy);
  return r;
}

// The window onto an RGB image of `width` pixels per row that starts at the pixels the filters read,
// as the JPEG decoder's regions do.
RgbWindow window(const std::vector<uint8_t>& rgb, int width, const Resampled& r) {
  return RgbWindow{rgb.data() + (static_cast<size_t>(r.fy.need_lo) * width + r.fx.need_lo) * 3,
                   static_cast<size_t>(width) * 3, r.fx.need_lo, r.fy.need_lo};
}

std::vector<float> random_floats(size_t n, uint64_t seed, float bound) {
  Rng rng(seed);
  std::vector<float> values(n);
  for (float& v : values) v = static_cast<float>(rng.uniform(0.0, bound));
  return values;
}

double clamp01(double v) { return std::min(1.0, std::max(0.0, v)); }

// Straightforward double-precision ColorJitter steps on a [0,1] RGB image.
void reference_step(ColorJitter::Op op, double factor, std::vector<double>& rgb) {
  const size_t pixels = rgb.size() / 3;
  auto gray = [&](size_t p) { return 0.299 * rgb[3 * p] + 0.587 * rgb[3 * p + 1] + 0.114 * rgb[3 * p + 2]; };
  double mean = 0;
  for (size_t p = 0; p < pixels; ++p) mean += gray(p);
  mean /= static_cast<double>(pixels);
  for (size_t p = 0; p < pixels; ++p) {
    const double g = gray(p);
    for (int c = 0; c < 3; ++c) {
      double& v = rgb[3 * p + c];
      switch (op) {
        case ColorJitter::Op::brightness: v = clamp01(v * factor); break;
        case ColorJitter::Op::contrast: v = clamp01(factor * v + (1 - factor) * mean); break;
        case ColorJitter::Op::saturation: v = clamp01(factor * v + (1 - factor) * g); break;
      }
    }
  }
}

double factor_of(const ColorJitter& jitter, ColorJitter::Op op) {
  return op == ColorJitter::Op::brightness ? jitter.brightness
         : op == ColorJitter::Op::contrast ? jitter.contrast
                                           : jitter.saturation;
}

}  // namespace

TEST_CASE("resample: the pixels of none and crop are pinned", "[data]") {
  // A hash of the outputs of a fixed set of geometries (downscaling, upscaling, identity, odd sizes,
  // flips, a window not at the image's origin). The value is what the resampler gave before its AVX2
  // rewrite, which changed no pixel: a change here changes what `none` and `crop` train on.
  const int width = 157, height = 119;
  const auto pixels = test_pixels(width, height, 3, 9);
  uint64_t hash = 14695981039346656037ull;
  ResampleScratch scratch;
  const std::pair<int, int> sizes[] = {{224, 224}, {32, 32}, {97, 130}, {119, 157}, {7, 300}};
  for (auto [oh, ow] : sizes) {
    for (auto augmentation : {Augmentation::none, Augmentation::crop}) {
      for (int k = 0; k < 4; ++k) {
        Rng rng(sample_key(3, k, oh));
        const auto r = plan(height, width, oh, ow, augmentation, rng);
        std::vector<float> out(static_cast<size_t>(oh) * ow * 3);
        resample_normalise(window(pixels, width, r), r.fx, r.fy, r.geometry.flip, scratch, out.data());
        hash = fnv1a(hash, out);
      }
    }
  }
  CHECK(hash == 0xb07db9284ea35b07ull);
}

TEST_CASE("resample: the taps stored are the widest output's", "[data]") {
  // Scale 1.4: the support allows 5 taps, but no output has more than ceil(2 * 1.4) = 3 weights.
  AxisFilter filter;
  compute_filter(AxisPlan{0.0, 140.0, 100, 0, 100, 0, 140}, filter);
  CHECK(filter.taps == 3);
  CHECK(*std::max_element(filter.count.begin(), filter.count.end()) == 3);
  REQUIRE(filter.weights.size() == 300);
  for (int o = 0; o < 100; ++o) {
    double total = 0;
    for (int t = 0; t < filter.taps; ++t) total += filter.weights[static_cast<size_t>(o) * 3 + t];
    CHECK(total == Approx(1.0).epsilon(1e-6));
  }
}

TEST_CASE("colour jitter: factors of 1 leave crop's output exactly as it is", "[data]") {
  const int width = 61, height = 47;
  const auto pixels = test_pixels(width, height, 3, 4);
  ResampleScratch scratch;
  const ColorJitter::Op b = ColorJitter::Op::brightness, c = ColorJitter::Op::contrast,
                        s = ColorJitter::Op::saturation;
  const ColorJitter::Op orders[6][3] = {{b, c, s}, {b, s, c}, {c, b, s}, {c, s, b}, {s, b, c}, {s, c, b}};
  // Output widths that are and are not multiples of the 8 pixels the jitter works on at a time.
  for (auto [oh, ow] : {std::pair{24, 24}, std::pair{13, 21}, std::pair{5, 3}}) {
    for (int k = 0; k < 6; ++k) {
      Rng rng(sample_key(1, k, ow));
      const auto r = plan(height, width, oh, ow, Augmentation::crop_color, rng);
      ColorJitter identity;
      std::copy(orders[k], orders[k] + 3, identity.order);
      std::vector<float> plain(static_cast<size_t>(oh) * ow * 3), jittered(plain.size());
      resample_normalise(window(pixels, width, r), r.fx, r.fy, r.geometry.flip, scratch, plain.data());
      resample_normalise(window(pixels, width, r), r.fx, r.fy, r.geometry.flip, scratch, jittered.data(), &identity);
      CHECK(jittered == plain);
    }
  }
}

TEST_CASE("colour jitter: each step is torchvision's formula", "[data]") {
  const int width = 37, height = 23;  // not a multiple of 8 pixels wide
  const auto image = random_floats(static_cast<size_t>(width) * height * 3, 12, 1.0f);
  for (auto op : {ColorJitter::Op::brightness, ColorJitter::Op::contrast, ColorJitter::Op::saturation}) {
    for (float factor : {0.6f, 0.85f, 1.0f, 1.23f, 1.4f}) {
      ColorJitter jitter;  // the other factors stay 1: those steps change nothing
      if (op == ColorJitter::Op::brightness) jitter.brightness = factor;
      if (op == ColorJitter::Op::contrast) jitter.contrast = factor;
      if (op == ColorJitter::Op::saturation) jitter.saturation = factor;
      auto got = image;
      color_jitter(jitter, got.data(), width, height, 1.0f);
      std::vector<double> expected(image.begin(), image.end());
      reference_step(op, factor, expected);
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
      INFO("step " << static_cast<int>(op) << " factor " << factor);
      CHECK(worst <= 1e-5);
    }
  }
}

TEST_CASE("colour jitter: the steps in the drawn order, on the whole image", "[data]") {
  const int width = 40, height = 9;
  const auto image = random_floats(static_cast<size_t>(width) * height * 3, 13, 1.0f);
  for (uint64_t key = 0; key < 12; ++key) {
    Rng rng(key);
    const ColorJitter jitter = random_color_jitter(rng);
    auto got = image;
    color_jitter(jitter, got.data(), width, height, 1.0f);
    std::vector<double> expected(image.begin(), image.end());
    for (auto op : jitter.order) reference_step(op, factor_of(jitter, op), expected);
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - expected[i]));
    CHECK(worst <= 1e-5);
  }
}

TEST_CASE("colour jitter: resample_normalise's fused jitter is color_jitter on the rounded pixels", "[data]") {
  const int width = 83, height = 64;
  const auto pixels = test_pixels(width, height, 3, 6);
  ResampleScratch scratch;
  for (int k = 0; k < 8; ++k) {
    Rng rng(sample_key(2, k, 0));
    const int oh = 19 + k, ow = 29 - k;
    const auto r = plan(height, width, oh, ow, Augmentation::crop_color, rng);
    const ColorJitter jitter = random_color_jitter(rng);
    std::vector<float> fused(static_cast<size_t>(oh) * ow * 3);
    resample_normalise(window(pixels, width, r), r.fx, r.fy, r.geometry.flip, scratch, fused.data(), &jitter);
    // Unflipped and unjittered 8-bit pixels, mirrored by hand, then jittered in 0-255.
    std::vector<uint8_t> rgb(fused.size());
    resample_rgb(window(pixels, width, r), r.fx, r.fy, scratch, rgb.data());
    std::vector<float> values(rgb.size());
    for (int y = 0; y < oh; ++y) {
      for (int x = 0; x < ow; ++x) {
        const int from = r.geometry.flip ? ow - 1 - x : x;
        for (int c = 0; c < 3; ++c) {
          values[(static_cast<size_t>(y) * ow + x) * 3 + c] = rgb[(static_cast<size_t>(y) * ow + from) * 3 + c];
        }
      }
    }
    color_jitter(jitter, values.data(), ow, oh, 255.0f);
    double worst = 0;
    for (size_t i = 0; i < values.size(); ++i) {
      const int c = static_cast<int>(i % 3);
      const double expected = (values[i] / 255.0 - kImageNetMean[c]) / kImageNetStd[c];
      worst = std::max(worst, std::abs(fused[i] - expected));
    }
    CHECK(worst <= 1e-5);
  }
}

TEST_CASE("colour jitter: factors in [0.6, 1.4], every order, drawn per sample", "[data]") {
  std::set<std::vector<int>> orders;
  std::set<float> brightness;
  double lo = 2, hi = 0;
  for (int64_t index = 0; index < 600; ++index) {
    Rng rng(sample_key(0, 0, index));
    const ColorJitter jitter = random_color_jitter(rng);
    std::vector<int> order;
    for (auto op : jitter.order) order.push_back(static_cast<int>(op));
    CHECK(std::set<int>(order.begin(), order.end()).size() == 3);
    orders.insert(order);
    brightness.insert(jitter.brightness);
    for (float f : {jitter.brightness, jitter.contrast, jitter.saturation}) {
      lo = std::min(lo, static_cast<double>(f));
      hi = std::max(hi, static_cast<double>(f));
    }
  }
  CHECK(orders.size() == 6);
  CHECK(brightness.size() == 600);  // every sample its own factors
  CHECK(lo >= 0.6);
  CHECK(lo < 0.62);
  CHECK(hi <= 1.4);
  CHECK(hi > 1.38);
}

TEST_CASE("augmentation crop_color: crop's boxes, then jitter, deterministic per (seed, epoch, index)", "[data]") {
  // The jitter is drawn after the crop and flip, so crop_color crops exactly as crop does.
  for (int64_t index = 0; index < 50; ++index) {
    Rng a(sample_key(5, 1, index)), b(sample_key(5, 1, index));
    const auto crop = plan_geometry(375, 500, 224, 224, Augmentation::crop, a);
    const auto crop_color = plan_geometry(375, 500, 224, 224, Augmentation::crop_color, b);
    CHECK(crop.x.in0 == crop_color.x.in0);
    CHECK(crop.x.in1 == crop_color.x.in1);
    CHECK(crop.y.in0 == crop_color.y.in0);
    CHECK(crop.y.in1 == crop_color.y.in1);
    CHECK(crop.flip == crop_color.flip);
  }
  TempDir dir;
  dir.mkdir("root/c");
  testing::write_jpeg(dir / "root/c/a.jpg", 120, 90, 1);
  testing::write_png(dir / "root/c/b.png", 90, 120, 2);
  const auto jittered = folder_source(dir, 24, Augmentation::crop_color);
  const auto cropped = folder_source(dir, 24, Augmentation::crop);
  for (int64_t index : {0, 1}) {
    const auto first = load(jittered, index, 7, 3);
    CHECK(first == load(jittered, index, 7, 3));  // a fresh scratch, as another thread's
    CHECK(first != load(jittered, index, 7, 4));  // another epoch
    CHECK(first != load(jittered, index, 8, 3));  // another seed
    CHECK(first != load(cropped, index, 7, 3));   // the jitter changed something
    CHECK(load(jittered, 0, 7, 3) != load(jittered, 1, 7, 3));
  }
}
