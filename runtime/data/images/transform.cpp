#include "runtime/data/images/transform.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace train::data {

namespace {

// Python's round(): halves go to the even neighbour (nearbyint under the default rounding mode).
int round_half_even(double value) { return static_cast<int>(std::nearbyint(value)); }

double bilinear(double x) {
  if (x < 0.0) x = -x;
  return x < 1.0 ? 1.0 - x : 0.0;
}

AxisPlan whole_axis(int size) { return AxisPlan{0.0, static_cast<double>(size), size, 0, size, 0, size}; }

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

ColorJitter random_color_jitter(Rng& rng) {
  ColorJitter jitter;
  // Fisher-Yates: each of the six orders equally likely.
  for (int i = 2; i > 0; --i) std::swap(jitter.order[i], jitter.order[rng.below(static_cast<uint64_t>(i) + 1)]);
  constexpr double lo = 1.0 - 0.4, hi = 1.0 + 0.4;
  jitter.brightness = static_cast<float>(rng.uniform(lo, hi));
  jitter.contrast = static_cast<float>(rng.uniform(lo, hi));
  jitter.saturation = static_cast<float>(rng.uniform(lo, hi));
  return jitter;
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
  if (augmentation == Augmentation::crop || augmentation == Augmentation::crop_color) {
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

namespace {

// The filter's support allows ceil(support) * 2 + 1 taps, but no output has more than ceil(2 support)
// non-zero weights (fewer after the edges' zeros are left out): stores only as many as the widest
// output has, which the resampler then reads. Only zero weights go, which added nothing: every output
// keeps its value exactly.
void drop_unused_taps(AxisFilter& filter) {
  const int outputs = static_cast<int>(filter.count.size());
  if (outputs == 0) return;
  const int taps = std::max(1, *std::max_element(filter.count.begin(), filter.count.end()));
  if (taps >= filter.taps) return;
  for (int o = 0; o < outputs; ++o) {
    std::memmove(filter.weights.data() + static_cast<size_t>(o) * taps,
                 filter.weights.data() + static_cast<size_t>(o) * filter.taps, sizeof(float) * taps);
  }
  filter.taps = taps;
  filter.weights.resize(static_cast<size_t>(outputs) * taps);
}

}  // namespace

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
  drop_unused_taps(filter);
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
// A lambda that is not inlined is compiled once, for the baseline, whatever clone calls it.
#define TRAIN_LAMBDA_INLINE __attribute__((always_inline))

namespace {

// Vector registers (GCC/Clang vector extensions). Rows of floats are packed RGB, 3 floats per pixel. The
// horizontal pass holds a pixel in 4 floats, the fourth ignored, and a v8f holds the same pixel of two
// rows; elsewhere a v8f is 8 floats of a row. Without AVX2 a v8f is two SSE registers.
// GCC warns that returning a 32-byte vector changes the ABI when AVX is on: every helper is inlined, so
// no such call exists. (Vector parameters are references: for those GCC prints a note the pragma does
// not silence.)
#pragma GCC diagnostic ignored "-Wpsabi"
using v4f = float __attribute__((vector_size(16)));
using v8f = float __attribute__((vector_size(32)));
using v8i = int32_t __attribute__((vector_size(32)));
using v16u8 = uint8_t __attribute__((vector_size(16)));
using v32u8 = uint8_t __attribute__((vector_size(32)));

TRAIN_INLINE v8f load8(const float* p) {
  v8f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

TRAIN_INLINE void store8(float* p, const v8f& v) { std::memcpy(p, &v, sizeof(v)); }

// Grows a buffer to at least `size` floats (never shrinks it: a resize that grows zero-fills, which
// would cost as much as a pass).
TRAIN_INLINE float* grow(std::vector<float>& buffer, size_t size) {
  if (buffer.size() < size) buffer.resize(size);
  return buffer.data();
}

TRAIN_INLINE void widen(const uint8_t* in, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(in[i]);
}

// Pixel j of each 16-byte half of `bytes` as floats: {r, g, b, 0} of the first half's, then of the
// second's. One byte shuffle (vpshufb within each 128-bit half) zero-extends them to 32 bits (index 32
// is a zero byte), as GCC does not widen bytes to floats well otherwise.
template <int J>
TRAIN_INLINE v8f pixel_pair(const v32u8& bytes) {
  const v32u8 zero = {};
  const v32u8 wide = __builtin_shufflevector(bytes, zero, 3 * J, 32, 32, 32, 3 * J + 1, 32, 32, 32, 3 * J + 2, 32, 32,
                                             32, 32, 32, 32, 32, 16 + 3 * J, 32, 32, 32, 17 + 3 * J, 32, 32, 32,
                                             18 + 3 * J, 32, 32, 32, 32, 32, 32, 32);
  return __builtin_convertvector(reinterpret_cast<v8i>(wide), v8f);
}

// Four pixels of two rows as floats, 8 per pixel (pixel_pair). Reads 16 bytes of each row (12 used).
TRAIN_INLINE void widen_pair_group(const uint8_t* a, const uint8_t* b, float* out) {
  v16u8 lo, hi;
  std::memcpy(&lo, a, sizeof(lo));
  std::memcpy(&hi, b, sizeof(hi));
  const v32u8 bytes = __builtin_shufflevector(lo, hi, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                              18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
  store8(out, pixel_pair<0>(bytes));
  store8(out + 8, pixel_pair<1>(bytes));
  store8(out + 16, pixel_pair<2>(bytes));
  store8(out + 24, pixel_pair<3>(bytes));
}

// Two rows of `span` RGB8 pixels as floats, interleaved pixel by pixel (see widen_pair_group). The last
// few pixels come from zero-padded copies, so that no byte past a row is read; up to 3 pixels of zeros
// are written after the last.
TRAIN_INLINE void widen_pair(const uint8_t* a, const uint8_t* b, int span, float* out) {
  int x = 0;
  for (; 3 * x + 16 <= 3 * span; x += 4) widen_pair_group(a + 3 * x, b + 3 * x, out + 8 * x);
  for (; x < span; x += 4) {
    uint8_t last_a[16] = {}, last_b[16] = {};
    const size_t bytes = static_cast<size_t>(std::min(4, span - x)) * 3;
    std::memcpy(last_a, a + 3 * x, bytes);
    std::memcpy(last_b, b + 3 * x, bytes);
    widen_pair_group(last_a, last_b, out + 8 * x);
  }
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

// quantise() on 8 floats, clamping after the conversion to integers, where it is two instructions (GCC
// makes compares and blends of the float clamps). The same results for every value above -2^31 and
// below 2^31 (the resampled values lie in [0, 255]: non-negative weights summing to 1).
TRAIN_INLINE v8f quantise8(const v8f& v) {
  const v8f half = v8f{} + 0.5f;
  v8i q = __builtin_convertvector(v + half, v8i);
  const v8i lo = v8i{}, hi = v8i{} + 255;
  q = q > lo ? q : lo;
  q = q < hi ? q : hi;
  return __builtin_convertvector(q, v8f);
}

// The same float32 operations as normalised_value(), element by element, so the results are identical.
TRAIN_INLINE void emit_normalised(const float* row, size_t n, const float* scale, const float* bias, float* out) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const v8f scaled = quantise8(load8(row + i)) * load8(scale + i);
    store8(out + i, scaled + load8(bias + i));
  }
  for (; i < n; ++i) {
    const float scaled = quantise(row[i]) * scale[i];
    out[i] = scaled + bias[i];
  }
}

TRAIN_INLINE void emit_bytes(const float* row, size_t n, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(static_cast<int32_t>(quantise(row[i])));
}

// One row pair of the horizontal pass (rows interleaved by widen_pair), outputs in the order they are
// stored, so that the fourth float each half of a v8f writes belongs to the next pixel, stored next.
// Every output reads `taps` pixels (weights past its count are zero, and so are the pixels past the
// row's end): x + 0 * y == x. Taps > 0 unrolls. Each output is the same sum in the same order as a
// pass over one row would compute: pairing rows changes only how many are computed at once.
template <int Taps>
TRAIN_INLINE void horizontal_pair(const float* pixels, const int* offsets, const float* weights, int out_width,
                                  float* out_a, float* out_b, int taps = Taps) {
  if constexpr (Taps > 0) taps = Taps;
  for (int d = 0; d < out_width; ++d) {
    const float* p = pixels + offsets[d];
    const float* k = weights + static_cast<size_t>(d) * taps;
    v8f sum = k[0] * load8(p);
    for (int t = 1; t < taps; ++t) sum += k[t] * load8(p + 8 * t);
    std::memcpy(out_a + 3 * d, &sum, sizeof(v4f));
    std::memcpy(out_b + 3 * d, reinterpret_cast<const uint8_t*>(&sum) + sizeof(v4f), sizeof(v4f));
  }
}

TRAIN_INLINE void horizontal_pair_taps(int taps, const float* pixels, const int* offsets, const float* weights,
                                       int out_width, float* out_a, float* out_b) {
  switch (taps) {
    case 2: horizontal_pair<2>(pixels, offsets, weights, out_width, out_a, out_b); break;
    case 3: horizontal_pair<3>(pixels, offsets, weights, out_width, out_a, out_b); break;
    case 4: horizontal_pair<4>(pixels, offsets, weights, out_width, out_a, out_b); break;
    case 5: horizontal_pair<5>(pixels, offsets, weights, out_width, out_a, out_b); break;
    case 6: horizontal_pair<6>(pixels, offsets, weights, out_width, out_a, out_b); break;
    case 7: horizontal_pair<7>(pixels, offsets, weights, out_width, out_a, out_b); break;
    default: horizontal_pair<0>(pixels, offsets, weights, out_width, out_a, out_b, taps); break;
  }
}

// One output row of the vertical pass: sums[i] = k[0] * rows[i] + k[1] * rows[stride + i] + ..., in
// that order, over `count` rows. Count > 0 unrolls.
template <int Count>
TRAIN_INLINE void vertical_row(const float* rows, size_t stride, const float* k, size_t n, float* sums,
                               int count = Count) {
  if constexpr (Count > 0) count = Count;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    v8f sum = k[0] * load8(rows + i);
    for (int t = 1; t < count; ++t) sum += k[t] * load8(rows + t * stride + i);
    store8(sums + i, sum);
  }
  for (; i < n; ++i) {
    float sum = k[0] * rows[i];
    for (int t = 1; t < count; ++t) sum += k[t] * rows[t * stride + i];
    sums[i] = sum;
  }
}

TRAIN_INLINE void vertical_row_count(int count, const float* rows, size_t stride, const float* k, size_t n,
                                     float* sums) {
  switch (count) {
    case 0: std::fill(sums, sums + n, 0.0f); break;
    case 1: vertical_row<1>(rows, stride, k, n, sums); break;
    case 2: vertical_row<2>(rows, stride, k, n, sums); break;
    case 3: vertical_row<3>(rows, stride, k, n, sums); break;
    case 4: vertical_row<4>(rows, stride, k, n, sums); break;
    default: vertical_row<0>(rows, stride, k, n, sums, count); break;
  }
}

// The horizontal pass (mirrored when flip) over the rows the vertical pass reads, two rows at a time,
// into `rows_data` (a row every `stride` floats). The output rows are one float longer than their
// pixels (the last pixel's ignored fourth float) and one more row is written when `rows` is odd.
TRAIN_INLINE void horizontal_pass(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, bool flip,
                                  ResampleScratch& scratch, float* rows_data, size_t stride) {
  const int out_width = static_cast<int>(fx.first.size());
  const size_t row_floats = static_cast<size_t>(out_width) * 3;
  const int rows = fy.need_hi - fy.need_lo;
  const int span = fx.need_hi - fx.need_lo;
  auto source_row = [&](int r) {
    return source.data + static_cast<ptrdiff_t>(fy.need_lo + r - source.origin_y) * source.stride +
           static_cast<ptrdiff_t>(fx.need_lo - source.origin_x) * 3;
  };
  if (fx.identity && !flip) {
    for (int r = 0; r < rows; ++r) widen(source_row(r), row_floats, rows_data + static_cast<size_t>(r) * stride);
    return;
  }
  // Zeros after the pixels: every output reads `taps` pixels (and widen_pair writes up to 3 more).
  const size_t pixel_floats = static_cast<size_t>(span) * 8, padding = static_cast<size_t>(fx.taps + 3) * 8;
  float* pixels = grow(scratch.pixels, pixel_floats + padding);
  std::fill(pixels + pixel_floats, pixels + pixel_floats + padding, 0.0f);
  // Each output's first pixel (in floats of the interleaved rows) and weights, in the order the outputs
  // are stored (mirrored when flip).
  scratch.offsets.resize(static_cast<size_t>(out_width));
  float* weights = grow(scratch.weights, static_cast<size_t>(out_width) * fx.taps);
  for (int d = 0; d < out_width; ++d) {
    const int o = flip ? out_width - 1 - d : d;
    scratch.offsets[d] = (fx.first[o] - fx.need_lo) * 8;
    std::memcpy(weights + static_cast<size_t>(d) * fx.taps, fx.weights.data() + static_cast<size_t>(o) * fx.taps,
                sizeof(float) * fx.taps);
  }
  for (int r = 0; r < rows; r += 2) {
    const int next = r + 1 < rows ? r + 1 : r;  // an odd last row is paired with itself
    widen_pair(source_row(r), source_row(next), span, pixels);
    horizontal_pair_taps(fx.taps, pixels, scratch.offsets.data(), weights, out_width,
                         rows_data + static_cast<size_t>(r) * stride, rows_data + static_cast<size_t>(r + 1) * stride);
  }
}

// The separable filter: horizontal pass, then vertical; emit(y, row) receives each output row as packed
// RGB floats.
template <typename Emit>
TRAIN_INLINE void resample(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, bool flip,
                           ResampleScratch& scratch, Emit emit) {
  const int out_width = static_cast<int>(fx.first.size());
  const int out_height = static_cast<int>(fy.first.size());
  const size_t row_floats = static_cast<size_t>(out_width) * 3;
  const int rows = fy.need_hi - fy.need_lo;
  const size_t stride = row_floats + 1;
  float* const rows_data = grow(scratch.rows, static_cast<size_t>(rows + 1) * stride);
  horizontal_pass(source, fx, fy, flip, scratch, rows_data, stride);
  float* sums = grow(scratch.sums, row_floats);
  for (int y = 0; y < out_height; ++y) {
    const float* first = rows_data + static_cast<size_t>(fy.first[y] - fy.need_lo) * stride;
    if (fy.identity) {
      emit(y, first);
      continue;
    }
    vertical_row_count(fy.count[y], first, stride, fy.weights.data() + static_cast<size_t>(y) * fy.taps,
                       row_floats, sums);
    emit(y, sums);
  }
}

// ---- Colour jitter ----
// 8 pixels at a time, as three vectors of 8 reds, greens and blues, all of the steps on a block while it
// is in registers. (GCC vectorises neither the grayscale of interleaved RGB nor the clamps of plain
// loops well.)

struct Planes8 {
  v8f r, g, b;
};

// 8 RGB pixels (24 floats) to planes and back: blends gather each channel's floats (their order
// scrambled), one permutation orders them.
TRAIN_INLINE Planes8 deinterleave8(const float* rgb) {
  const v8f a = load8(rgb), b = load8(rgb + 8), c = load8(rgb + 16);
  const v8f r = __builtin_shufflevector(__builtin_shufflevector(a, b, 0, 9, 2, 3, 12, 5, 6, 15), c, 0, 1, 10, 3, 4,
                                        13, 6, 7);  // a0 b1 c2 a3 b4 c5 a6 b7
  const v8f g = __builtin_shufflevector(__builtin_shufflevector(a, b, 0, 1, 10, 3, 4, 13, 6, 7), c, 8, 1, 2, 11, 4,
                                        5, 14, 7);  // c0 a1 b2 c3 a4 b5 c6 a7
  const v8f bl = __builtin_shufflevector(__builtin_shufflevector(a, b, 8, 1, 2, 11, 4, 5, 14, 7), c, 0, 9, 2, 3, 12,
                                         5, 6, 15);  // b0 c1 a2 b3 c4 a5 b6 c7
  return Planes8{__builtin_shufflevector(r, r, 0, 3, 6, 1, 4, 7, 2, 5),
                 __builtin_shufflevector(g, g, 1, 4, 7, 2, 5, 0, 3, 6),
                 __builtin_shufflevector(bl, bl, 2, 5, 0, 3, 6, 1, 4, 7)};
}

TRAIN_INLINE void interleave8(const Planes8& p, float* rgb) {
  const v8f r = __builtin_shufflevector(p.r, p.r, 0, 3, 6, 1, 4, 7, 2, 5);   // r0 r3 r6 r1 r4 r7 r2 r5
  const v8f g = __builtin_shufflevector(p.g, p.g, 5, 0, 3, 6, 1, 4, 7, 2);   // g5 g0 g3 g6 g1 g4 g7 g2
  const v8f bl = __builtin_shufflevector(p.b, p.b, 2, 5, 0, 3, 6, 1, 4, 7);  // b2 b5 b0 b3 b6 b1 b4 b7
  store8(rgb, __builtin_shufflevector(__builtin_shufflevector(r, g, 0, 9, 2, 3, 12, 5, 6, 15), bl, 0, 1, 10, 3, 4,
                                      13, 6, 7));  // r0 g0 b0 r1 g1 b1 r2 g2
  store8(rgb + 8, __builtin_shufflevector(__builtin_shufflevector(r, g, 0, 1, 10, 3, 4, 13, 6, 7), bl, 8, 1, 2, 11,
                                          4, 5, 14, 7));  // b2 r3 g3 b3 r4 g4 b4 r5
  store8(rgb + 16, __builtin_shufflevector(__builtin_shufflevector(r, g, 8, 1, 2, 11, 4, 5, 14, 7), bl, 0, 9, 2, 3,
                                           12, 5, 6, 15));  // g5 b5 r6 g6 b6 r7 g7 b7
}

// `n` pixels (8, or fewer at a row's end, the rest zeros) of interleaved RGB or of a row in planes
// (R[width] G[width] B[width]) from x on.
TRAIN_INLINE Planes8 load_rgb(const float* rgb, int n) {
  if (n == 8) return deinterleave8(rgb);
  float block[24] = {};
  std::memcpy(block, rgb, sizeof(float) * 3 * n);
  return deinterleave8(block);
}

TRAIN_INLINE void store_rgb(const Planes8& p, int n, float* rgb) {
  if (n == 8) return interleave8(p, rgb);
  float block[24];
  interleave8(p, block);
  std::memcpy(rgb, block, sizeof(float) * 3 * n);
}

TRAIN_INLINE Planes8 load_planes(const float* planes, int width, int x, int n) {
  if (n == 8) return Planes8{load8(planes + x), load8(planes + width + x), load8(planes + 2 * width + x)};
  float block[3][8] = {};
  for (int c = 0; c < 3; ++c) std::memcpy(block[c], planes + c * width + x, sizeof(float) * n);
  return Planes8{load8(block[0]), load8(block[1]), load8(block[2])};
}

TRAIN_INLINE void store_planes(const Planes8& p, int width, int x, int n, float* planes) {
  if (n == 8) {
    store8(planes + x, p.r);
    store8(planes + width + x, p.g);
    store8(planes + 2 * width + x, p.b);
    return;
  }
  const v8f* channels[3] = {&p.r, &p.g, &p.b};
  for (int c = 0; c < 3; ++c) std::memcpy(planes + c * width + x, channels[c], sizeof(float) * n);
}

TRAIN_INLINE v8f clamp8(const v8f& x, float bound) {
  const v8f zero = {}, top = zero + bound;
  const v8f v = x > zero ? x : zero;
  return v < top ? v : top;
}

TRAIN_INLINE v8f grayscale8(const Planes8& p) { return 0.299f * p.r + 0.587f * p.g + 0.114f * p.b; }

// torchvision's _blend(x, other, factor) = factor * x + (1 - factor) * other, clamped to [0, bound].
TRAIN_INLINE v8f blend8(const v8f& x, float factor, const v8f& other, float bound) {
  return clamp8(factor * x + (1.0f - factor) * other, bound);
}

TRAIN_INLINE void jitter_step(const ColorJitter& jitter, ColorJitter::Op op, float mean, float bound, Planes8& p) {
  switch (op) {
    case ColorJitter::Op::brightness: {
      const float f = jitter.brightness;  // _blend with black: f * x + (1 - f) * 0 == f * x
      p = Planes8{clamp8(f * p.r, bound), clamp8(f * p.g, bound), clamp8(f * p.b, bound)};
      break;
    }
    case ColorJitter::Op::contrast: {
      const v8f m = v8f{} + mean;
      p = Planes8{blend8(p.r, jitter.contrast, m, bound), blend8(p.g, jitter.contrast, m, bound),
                  blend8(p.b, jitter.contrast, m, bound)};
      break;
    }
    case ColorJitter::Op::saturation: {
      const v8f gray = grayscale8(p);
      p = Planes8{blend8(p.r, jitter.saturation, gray, bound), blend8(p.g, jitter.saturation, gray, bound),
                  blend8(p.b, jitter.saturation, gray, bound)};
      break;
    }
  }
}

// The jitter's steps [from, to) on a block (`mean`: the image's grayscale mean, used by contrast).
// Unrolled, so that the block stays in registers.
TRAIN_INLINE void jitter_block(const ColorJitter& jitter, int from, int to, float mean, float bound, Planes8& p) {
  if (from <= 0 && 0 < to) jitter_step(jitter, jitter.order[0], mean, bound, p);
  if (from <= 1 && 1 < to) jitter_step(jitter, jitter.order[1], mean, bound, p);
  if (from <= 2 && 2 < to) jitter_step(jitter, jitter.order[2], mean, bound, p);
}

// Where contrast, which needs the whole image's mean, comes in the jitter's order.
int contrast_step(const ColorJitter& jitter) {
  int step = 0;
  while (step < 3 && jitter.order[step] != ColorJitter::Op::contrast) ++step;
  return step;
}

// The sum of a row's grayscale: in float32 over 8 lanes (one per pixel of a block; a row end's zero
// pixels add nothing), then in double.
TRAIN_INLINE double lanes_total(const v8f& lanes) {
  double total = 0.0;
  for (int j = 0; j < 8; ++j) total += lanes[j];
  return total;
}

// The first pass over one row of interleaved RGB (rounded to integers by quantise() when Quantise): the
// steps before contrast, into `planes`; returns the row's grayscale sum. (The passes take the jitter by
// value: the image's floats could alias a referenced one's, and every block would reload the factors.)
template <bool Quantise>
TRAIN_INLINE double jitter_first_pass(const ColorJitter jitter, int contrast, float bound, const float* rgb,
                                      int width, float* planes) {
  v8f lanes = {};
  auto block = [&](int x, int n) TRAIN_LAMBDA_INLINE {
    Planes8 p = load_rgb(rgb + 3 * x, n);
    if constexpr (Quantise) p = Planes8{quantise8(p.r), quantise8(p.g), quantise8(p.b)};
    jitter_block(jitter, 0, contrast, 0.0f, bound, p);
    lanes += grayscale8(p);
    store_planes(p, width, x, n, planes);
  };
  int x = 0;
  for (; x + 8 <= width; x += 8) block(x, 8);
  if (x < width) block(x, width - x);
  return lanes_total(lanes);
}

// The second pass over one row in planes: contrast and the steps after it, into interleaved RGB,
// normalised when Normalise (the same float32 operations as emit_normalised on a rounded value).
template <bool Normalise>
TRAIN_INLINE void jitter_second_pass(const ColorJitter jitter, int contrast, float bound, float mean,
                                     const float* planes, int width, float* rgb) {
  const NormaliseConstants& k = normalise_constants();
  const v8f scale[3] = {v8f{} + k.scale[0], v8f{} + k.scale[1], v8f{} + k.scale[2]};
  const v8f bias[3] = {v8f{} + k.bias[0], v8f{} + k.bias[1], v8f{} + k.bias[2]};
  auto block = [&](int x, int n) TRAIN_LAMBDA_INLINE {
    Planes8 p = load_planes(planes, width, x, n);
    jitter_block(jitter, contrast, 3, mean, bound, p);
    if constexpr (Normalise) {
      const v8f r = p.r * scale[0], g = p.g * scale[1], b = p.b * scale[2];
      p = Planes8{r + bias[0], g + bias[1], b + bias[2]};
    }
    store_rgb(p, n, rgb + 3 * x);
  };
  int x = 0;
  for (; x + 8 <= width; x += 8) block(x, 8);
  if (x < width) block(x, width - x);
}

// The mean of the grayscale sums of width x height pixels.
TRAIN_INLINE float grayscale_mean(double total, int width, int height) {
  return static_cast<float>(total / (static_cast<double>(width) * height));
}

}  // namespace

// Colour jitter in two passes: the steps before contrast, summing the grayscale as each row is done;
// then contrast and the steps after it.
TRAIN_TARGET_CLONES void color_jitter(const ColorJitter& jitter, float* rgb, int width, int height, float bound) {
  const size_t row_floats = static_cast<size_t>(width) * 3;
  std::vector<float> planes(row_floats * height);
  const int contrast = contrast_step(jitter);
  double total = 0.0;
  for (int y = 0; y < height; ++y) {
    total += jitter_first_pass<false>(jitter, contrast, bound, rgb + y * row_floats, width,
                                      planes.data() + y * row_floats);
  }
  const float mean = grayscale_mean(total, width, height);
  for (int y = 0; y < height; ++y) {
    jitter_second_pass<false>(jitter, contrast, bound, mean, planes.data() + y * row_floats, width,
                              rgb + y * row_floats);
  }
}

// With jitter, the same two passes as color_jitter: the first as the resampled rows come, rounded, into
// `out` in planes; the second row by row through a scratch row, normalised back into `out`.
TRAIN_TARGET_CLONES void resample_normalise(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy,
                                            bool flip, ResampleScratch& scratch, float* out,
                                            const ColorJitter* jitter) {
  const int width = static_cast<int>(fx.first.size());
  const int height = static_cast<int>(fy.first.size());
  const size_t row_floats = static_cast<size_t>(width) * 3;
  if (jitter == nullptr) {
    normalise_pattern(width, scratch.scale, scratch.bias);
    const float* scale = scratch.scale.data();
    const float* bias = scratch.bias.data();
    resample(source, fx, fy, flip, scratch, [&](int y, const float* row) TRAIN_LAMBDA_INLINE {
      emit_normalised(row, row_floats, scale, bias, out + static_cast<size_t>(y) * row_floats);
    });
    return;
  }
  const int contrast = contrast_step(*jitter);
  double total = 0.0;
  resample(source, fx, fy, flip, scratch, [&](int y, const float* row) TRAIN_LAMBDA_INLINE {
    float* planes = out + static_cast<size_t>(y) * row_floats;
    total += jitter_first_pass<true>(*jitter, contrast, 255.0f, row, width, planes);
  });
  const float mean = grayscale_mean(total, width, height);
  float* planes = grow(scratch.sums, row_floats);  // the resampler is done with it
  for (int y = 0; y < height; ++y) {
    float* row = out + static_cast<size_t>(y) * row_floats;
    std::memcpy(planes, row, sizeof(float) * row_floats);
    jitter_second_pass<true>(*jitter, contrast, 255.0f, mean, planes, width, row);
  }
}

TRAIN_TARGET_CLONES void resample_rgb(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy,
                                      ResampleScratch& scratch, uint8_t* out) {
  const size_t row_floats = fx.first.size() * 3;
  resample(source, fx, fy, false, scratch, [&](int y, const float* row) TRAIN_LAMBDA_INLINE {
    emit_bytes(row, row_floats, out + static_cast<size_t>(y) * row_floats);
  });
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
