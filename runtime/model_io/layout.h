// Convolution weights at the file boundary. In memory our convolutions keep weights OHWI
// ([out][kh][kw][in], the channel innermost, matching NHWC activations); torchvision's files hold OIHW
// ([out][in][kh][kw]). These convert between the two; nothing else in the program sees OIHW.
#pragma once

#include <cstdint>
#include <vector>

namespace train::model_io {

// A convolution weight's dimensions, named rather than ordered, so neither layout is implied.
struct ConvWeightShape {
  int64_t out = 0;
  int64_t in = 0;
  int64_t kh = 0;
  int64_t kw = 0;

  int64_t elements() const { return out * in * kh * kw; }
  std::vector<int64_t> oihw() const { return {out, in, kh, kw}; }
  std::vector<int64_t> ohwi() const { return {out, kh, kw, in}; }
  // From torchvision's shape [out, in, kh, kw]. Throws std::invalid_argument unless it has 4 dimensions.
  static ConvWeightShape from_oihw(const std::vector<int64_t>& shape);
};

// dst[o][i][y][x] = src[o][y][x][i]. `src` and `dst` hold shape.elements() floats and must not overlap.
void ohwi_to_oihw(const float* src, float* dst, const ConvWeightShape& shape);
// dst[o][y][x][i] = src[o][i][y][x].
void oihw_to_ohwi(const float* src, float* dst, const ConvWeightShape& shape);

std::vector<float> ohwi_to_oihw(const std::vector<float>& src, const ConvWeightShape& shape);
std::vector<float> oihw_to_ohwi(const std::vector<float>& src, const ConvWeightShape& shape);

}  // namespace train::model_io
