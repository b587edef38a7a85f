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
template <typename T>
void ohwi_to_oihw(const T* src, T* dst, const ConvWeightShape& shape);
// dst[o][y][x][i] = src[o][i][y][x].
template <typename T>
void oihw_to_ohwi(const T* src, T* dst, const ConvWeightShape& shape);

template <typename T>
std::vector<T> ohwi_to_oihw(const std::vector<T>& src, const ConvWeightShape& shape);
template <typename T>
std::vector<T> oihw_to_ohwi(const std::vector<T>& src, const ConvWeightShape& shape);

}  // namespace train::model_io
