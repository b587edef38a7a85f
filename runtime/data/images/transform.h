// From a decoded image to the network's input: the geometry of `augmentation_type` (Augmentation, typed by
// the job: job/training_choices.h; which source pixels map to which output pixels, and whether to flip),
// resampling, and normalisation.
//
// Geometry, as torchvision:
//   none: Resize(shorter side = input size) then CenterCrop(input size); an image already of the input
//         size passes unchanged. For a non-square input the image is resized to just cover it.
//   crop: RandomResizedCrop(input size, scale=(0.08, 1), ratio=(3/4, 4/3)) with torchvision's algorithm
//         (10 attempts, then the centre-crop fallback), then RandomHorizontalFlip(p=0.5).
//   crop_color: crop, then colour jitter as torchvision's ColorJitter(brightness=0.4, contrast=0.4,
//         saturation=0.4) (hue 0, the classic ImageNet recipe); see ColorJitter below. Its random
//         numbers come after the crop's and the flip's, so crop_color crops exactly as crop does.
//   The random numbers come from our Rng keyed by (seed, epoch, sample index), not from torch's
//   generator, so the boxes are torchvision's distribution, not torchvision's draws.
// Resampling is PIL's bilinear filter with antialiasing (the triangle filter widened by the downscale
// factor, separable, horizontal pass then vertical, PIL's support and pixel-centre conventions), which is
// what torchvision applies to PIL images; a crop is resampled from the crop alone, as torchvision crops
// first, so no pixel outside the box contributes. We compute in float32 and round once at the end where
// PIL uses fixed point and rounds after each pass: results may differ from PIL's by one level.
// Colour jitter works on the resampled image, after its rounding to 8 bits and before normalisation, in
// float32 without rounding again (torchvision on a [0,1] tensor, scaled by 255): PIL, where the classic
// recipe applies ColorJitter, rounds to 8 bits after each adjustment and uses an integer mean for
// contrast, so results differ from PIL's by about a level.
// Normalisation: x = (p / 255 - mean[c]) / std[c], ImageNet's mean and standard deviation, computed in
// float32 as p * (1 / (255 std[c])) - mean[c] / std[c] (within a few ulps of the step-by-step formula).
#pragma once

#include "job/training_choices.h"
#include "runtime/data/random.h"

#include <cstdint>
#include <vector>

namespace train::data {

inline constexpr float kImageNetMean[3] = {0.485f, 0.456f, 0.406f};
inline constexpr float kImageNetStd[3] = {0.229f, 0.224f, 0.225f};

// The normalised value of an 8-bit sample of channel c (0 R, 1 G, 2 B).
float normalised_value(int channel, uint8_t value);

struct CropBox {
  int top = 0;
  int left = 0;
  int height = 0;
  int width = 0;
};

// torchvision's RandomResizedCrop.get_params(scale=(0.08, 1), ratio=(3/4, 4/3)).
CropBox random_resized_crop_box(int image_height, int image_width, Rng& rng);

// One axis of a resampling: output pixels [out_first, out_first + out_count) of a resize of the source
// interval [in0, in1) to out_size pixels, reading only source pixels [lo, hi).
struct AxisPlan {
  double in0 = 0;
  double in1 = 0;
  int out_size = 0;
  int out_first = 0;
  int out_count = 0;
  int lo = 0;
  int hi = 0;

  // Each output pixel is exactly one source pixel (no resampling along this axis).
  bool identity() const;
  // The same plan for the source scaled by eighths/8 (a JPEG decoded with DCT scaling) whose size along
  // this axis becomes scaled_extent.
  AxisPlan scaled(int eighths, int scaled_extent) const;
};

struct SampleGeometry {
  AxisPlan x;
  AxisPlan y;
  bool flip = false;
};

// The geometry of one sample. `rng` is used by crop only.
SampleGeometry plan_geometry(int image_height, int image_width, int out_height, int out_width,
                             Augmentation augmentation, Rng& rng);

// torchvision's ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4, hue=0) on a float RGB image
// with values in [0, bound] (bound 1 for torchvision's tensors; 255 in our pipeline): three factors
// drawn uniformly from [0.6, 1.4], the adjustments applied in a random order, each clamped to
// [0, bound] as torchvision's _blend does:
//   brightness: x * f
//   contrast:   f * x + (1 - f) * mean, mean = the mean over the image of its grayscale
//   saturation: f * x + (1 - f) * gray, gray = this pixel's grayscale
// grayscale = 0.299 R + 0.587 G + 0.114 B, PIL's convert("L") weights (torchvision's tensor functions
// use 0.2989 for R: at most 1e-4 apart on [0, 1]). A factor of 1 leaves every value exactly as it was.
struct ColorJitter {
  enum class Op : uint8_t { brightness, contrast, saturation };
  Op order[3] = {Op::brightness, Op::contrast, Op::saturation};
  float brightness = 1.0f;
  float contrast = 1.0f;
  float saturation = 1.0f;
};

// Draws the order (a uniform permutation, first, as torchvision's randperm) and then the brightness,
// contrast and saturation factors (float32, as torchvision's).
ColorJitter random_color_jitter(Rng& rng);

// Applies `jitter` in place to width x height RGB pixels (HWC floats in [0, bound]). The contrast mean
// is summed row by row in the same way as resample_normalise's, so the two agree exactly.
void color_jitter(const ColorJitter& jitter, float* rgb, int width, int height, float bound);

// The filter coefficients of one axis.
struct AxisFilter {
  int taps = 0;                 // coefficients stored per output pixel: the largest count
  std::vector<int> first;       // per output pixel: the first source pixel read
  std::vector<int> count;       // per output pixel: how many source pixels are read (non-zero weights)
  std::vector<float> weights;   // per output pixel: `taps` weights, the first `count` used; they sum to 1
  int need_lo = 0;              // the source pixels read by any output: [need_lo, need_hi)
  int need_hi = 0;
  bool identity = false;        // out pixel i is source pixel need_lo + i
};
void compute_filter(const AxisPlan& plan, AxisFilter& filter);

// A window onto RGB8 source pixels: pixel (x, y) of the plan's coordinates lies at
// data + (y - origin_y) * stride + (x - origin_x) * 3.
struct RgbWindow {
  const uint8_t* data = nullptr;
  size_t stride = 0;
  int origin_x = 0;
  int origin_y = 0;
};

struct ResampleScratch {
  std::vector<float> pixels;  // two source rows as floats, interleaved pixel by pixel
  std::vector<float> rows;    // the horizontal pass's output
  std::vector<float> sums;    // the vertical pass's output row
  std::vector<float> scale;   // normalisation constants for one output row
  std::vector<float> bias;
  std::vector<int> offsets;   // the horizontal pass's outputs in store order
  std::vector<float> weights;
};

// Resamples and normalises: writes fy.first.size() rows of fx.first.size() pixels as normalised
// float32 RGB (HWC), mirrored left-right when flip. The filter runs in float32 (horizontal pass, then
// vertical); each result is rounded to an integer in 0-255 (as PIL's 8-bit output) and then normalised,
// so out == normalised_value(c, rounded sample) exactly. With `jitter`, color_jitter(*jitter, bound 255)
// is applied between the rounding and the normalisation (with the same results, bit for bit).
void resample_normalise(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, bool flip,
                        ResampleScratch& scratch, float* out, const ColorJitter* jitter = nullptr);

// The same resampling with the rounded 8-bit RGB result (fy.first.size() rows of fx.first.size() pixels).
void resample_rgb(const RgbWindow& source, const AxisFilter& fx, const AxisFilter& fy, ResampleScratch& scratch,
                  uint8_t* out);

// Writes width x height RGB8 pixels as normalised float32 HWC (mirrored left-right when flip).
void normalise_rgb(const uint8_t* rgb, int width, int height, bool flip, float* out);

}  // namespace train::data
