#include "runtime/data/transform.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace train::data {

namespace {

// Python's round(): halves go to the even neighbour (nearbyint under the default rounding mode).
int round_half_even(double value) { return static_cast<int>(std::nearbyint(value)); }

double bilinear(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

AxisPlan whole_axis(int size) { return AxisPlan{0.0, static_cast<double>(size), size, 0, size, 0, size}; }

}  // namespace

Augmentation parse_augmentation(std::string_view name) {
  if (name == "none") return Augmentation::none;
  if (name == "crop") return Augmentation::crop;
  throw std::invalid_argument(fmt::format("augmentation_type: expected none or crop, got \"{}\"", name));
}

const char* augmentation_name(Augmentation augmentation) {
  return augmentation == Augmentation::none ? "none" : "crop";
}

namespace {

// (p / 255 - mean) / std as one multiply and one add: within a few float32 ulps of the formula
// evaluated step by step (as torchvision does), and much cheaper than its two divisions.
struct NormaliseConstants {
  float scale[4];
  float bias[4];
  NormaliseConstants() {
    for (int c = 0; c < 3; ++c) {
      scale[c] = static_cast<float>(1.0 / (255.0 * static_cast<double>(kImageNetStd[c])));
      bias[c] = static_cast<float>(-static_cast<double>(kImageNetMean[c]) / static_cast<double>(kImageNetStd[c]));
    }
    scale[3] = bias[3] = 0.0f;
  }
};

const NormaliseConstants& normalise_constants() {
  static const NormaliseConstants constants;
  return constants;
}

}  // namespace

float normalised_value(int channel, uint8_t value) {
  const NormaliseConstants& k = normalise_constants();
  const float scaled = static_cast<float>(value) * k.scale[channel];
  return scaled + k.bias[channel];
}

CropBox random_resized_crop_box(int image_height, int image_width, Rng& rng) {
  constexpr double min_scale = 0.08, max_scale = 1.0;
  constexpr double min_ratio = 3.0 / 4.0, max_ratio = 4.0 / 3.0;
  const double area = static_cast<double>(image_height) * image_width;
  const double log_min = std::log(min_ratio), log_max = std::log(max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.uniform(min_scale, max_scale);
    const double aspect_ratio = std::exp(rng.uniform(log_min, log_max));
    const int width = round_half_even(std::sqrt(target_area * aspect_ratio));
    const int height = round_half_even(std::sqrt(target_area / aspect_ratio));
    if (0 < width && width <= image_width && 0 < height && height <= image_height) {
      CropBox box;
      box.height = height;
      box.width = width;
      box.top = static_cast<int>(rng.below(static_cast<uint64_t>(image_height - height + 1)));
      box.left = static_cast<int>(rng.below(static_cast<uint64_t>(image_width - width + 1)));
      return box;
    }
  }
  // Fallback: the largest centred box whose ratio is in range.
  CropBox box;
  const double in_ratio = static_cast<double>(image_width) / image_height;
  if (in_ratio < min_ratio) {
    box.width = image_width;
    box.height = round_half_even(box.width / min_ratio);
  } else if (in_ratio > max_ratio) {
    box.height = image_height;
    box.width = round_half_even(box.height * max_ratio);
  } else {
    box.width = image_width;
    box.height = image_height;
  }
  box.top = (image_height - box.height) / 2;
  box.left = (image_width - box.width) / 2;
  return box;
}

bool AxisPlan::identity() const {
  return static_cast<double>(out_size) == in1 - in0 && in0 == std::floor(in0);
}

AxisPlan AxisPlan::scaled(int eighths, int scaled_extent) const {
  if (eighths == 8) return *this;
  const double factor = eighths / 8.0;
  AxisPlan plan = *this;
  plan.in0 = in0 * factor;
  plan.in1 = in1 * factor;
  plan.lo = std::clamp(static_cast<int>(std::floor(lo * factor)), 0, scaled_extent - 1);
  plan.hi = std::clamp(static_cast<int>(std::ceil(hi * factor)), plan.lo + 1, scaled_extent);
  return plan;
}

SampleGeometry plan_geometry(int image_height, int image_width, int out_height, int out_width,
                             Augmentation augmentation, Rng& rng) {
  SampleGeometry geometry;
  if (augmentation == Augmentation::crop) {
    const CropBox box = random_resized_crop_box(image_height, image_width, rng);
    geometry.x = AxisPlan{static_cast<double>(box.left), static_cast<double>(box.left + box.width), out_width, 0,
                          out_width, box.left, box.left + box.width};
    geometry.y = AxisPlan{static_cast<double>(box.top), static_cast<double>(box.top + box.height), out_height, 0,
                          out_height, box.top, box.top + box.height};
    geometry.flip = rng.uniform01() < 0.5;
    return geometry;
  }
  if (image_height == out_height && image_width == out_width) {
    geometry.x = whole_axis(image_width);
    geometry.y = whole_axis(image_height);
    return geometry;
  }
  // Resize so the image just covers the output (for a square output: the shorter side becomes the
  // output size and the longer int(size * long / short), as torchvision's Resize), then centre-crop.
  int64_t resized_height, resized_width;
  if (int64_t{out_height} * image_width >= int64_t{out_width} * image_height) {
    resized_height = out_height;
    resized_width = std::max<int64_t>(out_width, int64_t{image_width} * out_height / image_height);
  } else {
    resized_width = out_width;
    resized_height = std::max<int64_t>(out_height, int64_t{image_height} * out_width / image_width);
  }
  // torchvision's CenterCrop: int(round((size - crop) / 2.0)).
  const int top = round_half_even(static_cast<double>(resized_height - out_height) / 2.0);
  const int left = round_half_even(static_cast<double>(resized_width - out_width) / 2.0);
  geometry.x = AxisPlan{0.0, static_cast<double>(image_width), static_cast<int>(resized_width), left, out_width, 0,
                        image_width};
  geometry.y = AxisPlan{0.0, static_cast<double>(image_height), static_cast<int>(resized_height), top, out_height, 0,
                        image_height};
  return geometry;
}

void compute_filter(const AxisPlan& plan, AxisFilter& filter) {
  const int outputs = plan.out_count;
  filter.first.resize(outputs);
  filter.count.resize(outputs);
  filter.identity = plan.identity();
  if (filter.identity) {
    const int start = static_cast<int>(plan.in0) + plan.out_first;
    filter.taps = 1;
    filter.weights.assign(outputs, 1.0f);
    for (int o = 0; o < outputs; ++o) {
      filter.first[o] = start + o;
      filter.count[o] = 1;
    }
    filter.need_lo = start;
    filter.need_hi = start + outputs;
    return;
  }
  // PIL's precompute_coeffs in the coordinates of [lo, hi), so a crop behaves as the cropped image.
  const double scale = (plan.in1 - plan.in0) / plan.out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = filter_scale;  // the bilinear filter's support is 1
  const int taps = static_cast<int>(std::ceil(support)) * 2 + 1;
  const double in0 = plan.in0 - plan.lo;
  const int size = plan.hi - plan.lo;
  filter.taps = taps;
  filter.weights.assign(static_cast<size_t>(outputs) * taps, 0.0f);
  std::vector<double> weights(static_cast<size_t>(taps));
  filter.need_lo = plan.hi;
  filter.need_hi = plan.lo;
  for (int o = 0; o < outputs; ++o) {
    const double center = in0 + (plan.out_first + o + 0.5) * scale;
    const double inverse = 1.0 / filter_scale;
    int xmin = static_cast<int>(center - support + 0.5);
    if (xmin < 0) xmin = 0;
    int xmax = static_cast<int>(center + support + 0.5);
    if (xmax > size) xmax = size;
    int count = std::clamp(xmax - xmin, 0, taps);
    double total = 0.0;
    for (int x = 0; x < count; ++x) {
      weights[x] = bilinear((x + xmin - center + 0.5) * inverse);
      total += weights[x];
    }
    // Zero weights at either end read pixels for nothing: leave them out.
    int skip = 0;
    while (skip < count && weights[skip] == 0.0) ++skip;
    while (count > skip && weights[count - 1] == 0.0) --count;
    count -= skip;
    float* k = filter.weights.data() + static_cast<size_t>(o) * taps;
    for (int x = 0; x < count; ++x) k[x] = static_cast<float>(weights[skip + x] / total);
    filter.first[o] = plan.lo + xmin + skip;
    filter.count[o] = count;
    if (count > 0) {
      filter.need_lo = std::min(filter.need_lo, filter.first[o]);
      filter.need_hi = std::max(filter.need_hi, filter.first[o] + count);
    }
  }
  if (filter.need_hi <= filter.need_lo) {
    filter.need_lo = plan.lo;
    filter.need_hi = plan.lo + 1;
  }
}

// The resampling functions are compiled twice, for AVX2 and for the baseline (SSE2), and the loader
// picks one at run time (GCC's target_clones); the helpers are inlined into each.
// (Not under ThreadSanitizer, whose instrumented ifunc resolvers run before it is initialised.)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define TRAIN_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define TRAIN_TARGET_CLONES
#endif
#define TRAIN_INLINE inline __attribute__((always_inline))

namespace {

// Four floats (one RGB pixel and the next pixel's red, which is ignored) in a vector register
// (GCC/Clang vector extension). Rows of floats are packed RGB, 3 floats per pixel.
using v4f = float __attribute__((vector_size(16)));

TRAIN_INLINE v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

TRAIN_INLINE void store4(float* p, v4f v) { std::memcpy(p, &v, sizeof(v)); }

TRAIN_INLINE void widen(const uint8_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

// Rounds to an integer in [0, 255] (half up), as a float.
TRAIN_INLINE float quantise(float v) {
  v = v > 0.0f ? v : 0.0f;
  v = v < 255.0f ? v : 255.0f;
  return static_cast<float>(static_cast<int32_t>(v + 0.5f));
}

// The per-float normalisation constants of a row of `width` RGB pixels.
TRAIN_INLINE void normalise_pattern(int width, std::vector<float>& scale, std::vector<float>& bias) {
  const NormaliseConstants& k = normalise_constants();
  scale.resize(static_cast<size_t>(width) * 3);
  bias.resize(scale.size());
  for (size_t i = 0; i < scale.size(); ++i) {
    scale[i] = k.scale[i % 3];
    bias[i] = k.bias[i % 3];
  }
}

// The same float32 operations as normalised_value(), element by element, so the results are identical.
TRAIN_INLINE void emit_normalised(const float* row, size_t n, const float* scale, const float* bias, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const float scaled = quantise(row[i]) * scale[i];
    out[i] = scaled + bias[i];
  }
}

TRAIN_INLINE void emit_bytes(const float* row, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(static_cast<int32_t>(quantise(row[i])));
}

// One row of the horizontal pass, outputs in the order they are stored, so that the fourth lane each
// store4 writes belongs to the next pixel, stored next. Every output reads `taps` pixels (weights past
// its count are zero, and so are the pixels past the row's end): x + 0 * y == x. Taps > 0 unrolls.
template <int Taps>
TRAIN_INLINE void horizontal_row(const float* pixels, const int* offsets, const float* weights, int out_width,
                                 float* out, int taps = Taps) {
  if constexpr (Taps > 0) taps = Taps;
  for (int d = 0; d < out_width; ++d) {
    const float* p = pixels + offsets[d];
    const float* k = weights + static_cast<size_t>(d) * taps;
    v4f sum = k[0] * load4(p);
    for (int t = 1; t < taps; ++t) sum += k[t] * load4(p + 3 * t);
    store4(out + 3 * d, sum);
  }
}

// The separable filter: horizontal pass (mirrored when flip) over the rows the vertical pass reads,
// then the vertical pass; emit(y, row) receives each output row as packed RGB floats.
template <typename Emit>
TRAIN_INLINE void resample(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, bool flip,
                           ResampleScratch& scratch, Emit emit) {
  const int out_width = static_cast<int>(fx.first.size());
  const int out_height = static_cast<int>(fy.first.size());
  const size_t row_floats = static_cast<size_t>(out_width) * 3;
  const int rows = fy.need_hi - fy.need_lo;
  const int span = fx.need_hi - fx.need_lo;
  // Buffers only grow (a resize that grows zero-fills, which would cost as much as a pass).
  auto reserve = [](std::vector<float>& buffer, size_t size) {
    if (buffer.size() < size) buffer.resize(size);
    return buffer.data();
  };
  // Zeros after the row: every output reads `taps` pixels plus one float (see below).
  const size_t pixel_floats = static_cast<size_t>(span) * 3;
  float* pixels = reserve(scratch.pixels, pixel_floats + static_cast<size_t>(fx.taps) * 3 + 1);
  std::fill(pixels + pixel_floats, pixels + pixel_floats + static_cast<size_t>(fx.taps) * 3 + 1, 0.0f);
  float* const rows_data = reserve(scratch.rows, static_cast<size_t>(rows) * row_floats + 1);  // + 1: see store4
  // Each output's first pixel and weights, in the order the outputs are stored (mirrored when flip).
  scratch.offsets.resize(static_cast<size_t>(out_width));
  float* weights = reserve(scratch.weights, static_cast<size_t>(out_width) * fx.taps);
  for (int d = 0; d < out_width; ++d) {
    const int o = flip ? out_width - 1 - d : d;
    scratch.offsets[d] = (fx.first[o] - fx.need_lo) * 3;
    std::memcpy(weights + static_cast<size_t>(d) * fx.taps, fx.weights.data() + static_cast<size_t>(o) * fx.taps,
                sizeof(float) * fx.taps);
  }
  const int* offsets = scratch.offsets.data();
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in = source.data + static_cast<ptrdiff_t>(fy.need_lo + r - source.origin_y) * source.stride +
                        static_cast<ptrdiff_t>(fx.need_lo - source.origin_x) * 3;
    float* out = rows_data + static_cast<size_t>(r) * row_floats;
    if (fx.identity && !flip) {
      widen(in, row_floats, out);
      continue;
    }
    widen(in, pixel_floats, pixels);
    switch (fx.taps) {
      case 3: horizontal_row<3>(pixels, offsets, weights, out_width, out); break;
      case 5: horizontal_row<5>(pixels, offsets, weights, out_width, out); break;
      case 7: horizontal_row<7>(pixels, offsets, weights, out_width, out); break;
      case 9: horizontal_row<9>(pixels, offsets, weights, out_width, out); break;
      default: horizontal_row<0>(pixels, offsets, weights, out_width, out, fx.taps); break;
    }
  }
  float* sums = reserve(scratch.sums, row_floats);
  for (int y = 0; y < out_height; ++y) {
    const float* first = rows_data + static_cast<size_t>(fy.first[y] - fy.need_lo) * row_floats;
    if (fy.identity) {
      emit(y, first);
      continue;
    }
    const float* k = fy.weights.data() + static_cast<size_t>(y) * fy.taps;
    if (fy.count[y] == 0) {
      std::fill(sums, sums + row_floats, 0.0f);
    } else {
      const float weight = k[0];
      for (size_t i = 0; i < row_floats; ++i) sums[i] = weight * first[i];
    }
    for (int t = 1; t < fy.count[y]; ++t) {
      const float weight = k[t];
      const float* in = first + static_cast<size_t>(t) * row_floats;
      for (size_t i = 0; i < row_floats; ++i) sums[i] += weight * in[i];
    }
    emit(y, sums);
  }
}

}  // namespace

TRAIN_TARGET_CLONES void resample_normalise(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy,
                                            bool flip, ResampleScratch& scratch, float* out) {
  const int width = static_cast<int>(fx.first.size());
  const size_t row_floats = static_cast<size_t>(width) * 3;
  normalise_pattern(width, scratch.scale, scratch.bias);
  const float* scale = scratch.scale.data();
  const float* bias = scratch.bias.data();
  resample(source, fx, fy, flip, scratch, [&](int y, const float* row) {
    emit_normalised(row, row_floats, scale, bias, out + static_cast<size_t>(y) * row_floats);
  });
}

TRAIN_TARGET_CLONES void resample_rgb(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy,
                                      ResampleScratch& scratch, uint8_t* out) {
  const size_t row_floats = fx.first.size() * 3;
  resample(source, fx, fy, false, scratch,
           [&](int y, const float* row) { emit_bytes(row, row_floats, out + static_cast<size_t>(y) * row_floats); });
}

TRAIN_TARGET_CLONES void normalise_rgb(const uint8_t* rgb, int width, int height, bool flip, float* out) {
  const size_t row_floats = static_cast<size_t>(width) * 3;
  std::vector<float> scale, bias, row(row_floats), mirrored;
  normalise_pattern(width, scale, bias);
  if (flip) mirrored.resize(row_floats);
  for (int y = 0; y < height; ++y) {
    const uint8_t* in = rgb + static_cast<size_t>(y) * row_floats;
    widen(in, row_floats, row.data());
    if (flip) {
      for (int x = 0; x < width; ++x) std::memcpy(&mirrored[3 * x], &row[3 * (width - 1 - x)], 3 * sizeof(float));
      std::swap(row, mirrored);
    }
    emit_normalised(row.data(), row_floats, scale.data(), bias.data(), out + static_cast<size_t>(y) * row_floats);
  }
}

}  // namespace train::data
