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

float normalised_value(int channel, uint8_t value) {
  return (static_cast<float>(value) / 255.0f - kImageNetMean[channel]) / kImageNetStd[channel];
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

namespace {

// Four floats, one pixel (R, G, B and an unused lane), in SSE registers (GCC/Clang vector extension).
using v4f = float __attribute__((vector_size(16)));
using v4i = int32_t __attribute__((vector_size(16)));

v4f load4(const float* p) {
  v4f v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void store4(float* p, v4f v) { std::memcpy(p, &v, sizeof(v)); }

struct ByteToFloat {
  float value[256];
  ByteToFloat() {
    for (int i = 0; i < 256; ++i) value[i] = static_cast<float>(i);
  }
};

const float* byte_to_float() {
  static const ByteToFloat table;
  return table.value;
}

// n RGB8 pixels to RGBx floats.
void widen(const uint8_t* in, int n, float* out) {
  const float* f = byte_to_float();
  for (int i = 0; i < n; ++i) {
    out[4 * i + 0] = f[in[3 * i + 0]];
    out[4 * i + 1] = f[in[3 * i + 1]];
    out[4 * i + 2] = f[in[3 * i + 2]];
    out[4 * i + 3] = 0.0f;
  }
}

// Rounds RGBx floats to integers in [0, 255], as floats.
v4f quantise(v4f v) {
  const v4f zero = {0, 0, 0, 0}, top = {255, 255, 255, 255}, half = {0.5f, 0.5f, 0.5f, 0.5f};
  v = v > zero ? v : zero;
  v = v < top ? v : top;
  return __builtin_convertvector(__builtin_convertvector(v + half, v4i), v4f);
}

// One row of `width` RGBx floats to normalised RGB floats (mirrored when flip). The same float32
// operations as normalised_value(), lane by lane, so the results are identical.
void emit_normalised(const float* row, int width, bool flip, float* out) {
  const v4f scale = {255.0f, 255.0f, 255.0f, 255.0f};
  const v4f mean = {kImageNetMean[0], kImageNetMean[1], kImageNetMean[2], 0.0f};
  const v4f std_dev = {kImageNetStd[0], kImageNetStd[1], kImageNetStd[2], 1.0f};
  for (int d = 0; d < width; ++d) {
    const int x = flip ? width - 1 - d : d;
    const v4f value = (quantise(load4(row + 4 * x)) / scale - mean) / std_dev;
    if (d + 1 < width) {
      store4(out + 3 * d, value);  // its fourth lane is overwritten by the next pixel
    } else {
      out[3 * d + 0] = value[0];
      out[3 * d + 1] = value[1];
      out[3 * d + 2] = value[2];
    }
  }
}

void emit_bytes(const float* row, int width, uint8_t* out) {
  for (int x = 0; x < width; ++x) {
    const v4f value = quantise(load4(row + 4 * x));
    out[3 * x + 0] = static_cast<uint8_t>(value[0]);
    out[3 * x + 1] = static_cast<uint8_t>(value[1]);
    out[3 * x + 2] = static_cast<uint8_t>(value[2]);
  }
}

// The separable filter: horizontal pass over the rows the vertical pass reads, then the vertical pass;
// emit(y, row) receives each output row as RGBx floats.
template <typename Emit>
void resample(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, ResampleScratch& scratch,
              Emit emit) {
  const int out_width = static_cast<int>(fx.first.size());
  const int out_height = static_cast<int>(fy.first.size());
  const size_t row_floats = static_cast<size_t>(out_width) * 4;
  const int rows = fy.need_hi - fy.need_lo;
  const int span = fx.need_hi - fx.need_lo;
  scratch.pixels.resize(static_cast<size_t>(span) * 4);
  scratch.rows.resize(static_cast<size_t>(rows) * row_floats);
  float* pixels = scratch.pixels.data();
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in = source.data + static_cast<ptrdiff_t>(fy.need_lo + r - source.origin_y) * source.stride +
                        static_cast<ptrdiff_t>(fx.need_lo - source.origin_x) * 3;
    float* out = scratch.rows.data() + static_cast<size_t>(r) * row_floats;
    if (fx.identity) {
      widen(in, out_width, out);
      continue;
    }
    widen(in, span, pixels);
    for (int o = 0; o < out_width; ++o) {
      const float* k = fx.weights.data() + static_cast<size_t>(o) * fx.taps;
      const float* p = pixels + static_cast<ptrdiff_t>(fx.first[o] - fx.need_lo) * 4;
      v4f sum = {0, 0, 0, 0};
      for (int t = 0; t < fx.count[o]; ++t) sum += k[t] * load4(p + 4 * t);
      store4(out + 4 * o, sum);
    }
  }
  scratch.sums.resize(row_floats);
  float* sums = scratch.sums.data();
  for (int y = 0; y < out_height; ++y) {
    const float* first = scratch.rows.data() + static_cast<size_t>(fy.first[y] - fy.need_lo) * row_floats;
    if (fy.identity) {
      emit(y, first);
      continue;
    }
    const float* k = fy.weights.data() + static_cast<size_t>(y) * fy.taps;
    std::fill(sums, sums + row_floats, 0.0f);
    for (int t = 0; t < fy.count[y]; ++t) {
      const float weight = k[t];
      const float* in = first + static_cast<size_t>(t) * row_floats;
      for (size_t i = 0; i < row_floats; ++i) sums[i] += weight * in[i];
    }
    emit(y, sums);
  }
}

}  // namespace

void resample_normalise(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, bool flip,
                        ResampleScratch& scratch, float* out) {
  const int width = static_cast<int>(fx.first.size());
  resample(source, fx, fy, scratch, [&](int y, const float* row) {
    emit_normalised(row, width, flip, out + static_cast<size_t>(y) * width * 3);
  });
}

void resample_rgb(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, ResampleScratch& scratch,
                  uint8_t* out) {
  const int width = static_cast<int>(fx.first.size());
  resample(source, fx, fy, scratch,
           [&](int y, const float* row) { emit_bytes(row, width, out + static_cast<size_t>(y) * width * 3); });
}

void normalise_rgb(const uint8_t* rgb, int width, int height, bool flip, float* out) {
  std::vector<float> row(static_cast<size_t>(width) * 4);
  for (int y = 0; y < height; ++y) {
    widen(rgb + static_cast<size_t>(y) * width * 3, width, row.data());
    emit_normalised(row.data(), width, flip, out + static_cast<size_t>(y) * width * 3);
  }
}

}  // namespace train::data
