#include "runtime/model_io/layout.h"

#include <fmt/format.h>

#include <stdexcept>

namespace train::model_io {

namespace {

template <typename T>
void check_size(const std::vector<T>& src, const ConvWeightShape& shape) {
  if (static_cast<int64_t>(src.size()) != shape.elements()) {
    throw std::invalid_argument(fmt::format("convolution weight [{}, {}, {}, {}] needs {} values, got {}", shape.out,
                                            shape.in, shape.kh, shape.kw, shape.elements(), src.size()));
  }
}

}  // namespace

ConvWeightShape ConvWeightShape::from_oihw(const std::vector<int64_t>& shape) {
  if (shape.size() != 4) {
    throw std::invalid_argument(
        fmt::format("a convolution weight has 4 dimensions [out, in, kh, kw], got [{}]", fmt::join(shape, ", ")));
  }
  return {shape[0], shape[1], shape[2], shape[3]};
}

template <typename T>
void ohwi_to_oihw(const T* src, T* dst, const ConvWeightShape& s) {
  const int64_t spatial = s.kh * s.kw;
  for (int64_t o = 0; o < s.out; ++o) {
    const T* from = src + o * spatial * s.in;  // [kh][kw][in]
    T* to = dst + o * s.in * spatial;          // [in][kh][kw]
    for (int64_t p = 0; p < spatial; ++p) {
      for (int64_t i = 0; i < s.in; ++i) to[i * spatial + p] = from[p * s.in + i];
    }
  }
}

template <typename T>
void oihw_to_ohwi(const T* src, T* dst, const ConvWeightShape& s) {
  const int64_t spatial = s.kh * s.kw;
  for (int64_t o = 0; o < s.out; ++o) {
    const T* from = src + o * s.in * spatial;  // [in][kh][kw]
    T* to = dst + o * spatial * s.in;          // [kh][kw][in]
    for (int64_t i = 0; i < s.in; ++i) {
      for (int64_t p = 0; p < spatial; ++p) to[p * s.in + i] = from[i * spatial + p];
    }
  }
}

template <typename T>
std::vector<T> ohwi_to_oihw(const std::vector<T>& src, const ConvWeightShape& shape) {
  check_size(src, shape);
  std::vector<T> dst(src.size());
  ohwi_to_oihw(src.data(), dst.data(), shape);
  return dst;
}

template <typename T>
std::vector<T> oihw_to_ohwi(const std::vector<T>& src, const ConvWeightShape& shape) {
  check_size(src, shape);
  std::vector<T> dst(src.size());
  oihw_to_ohwi(src.data(), dst.data(), shape);
  return dst;
}

template void ohwi_to_oihw(const float*, float*, const ConvWeightShape&);
template void ohwi_to_oihw(const double*, double*, const ConvWeightShape&);
template void oihw_to_ohwi(const float*, float*, const ConvWeightShape&);
template void oihw_to_ohwi(const double*, double*, const ConvWeightShape&);
template std::vector<float> ohwi_to_oihw(const std::vector<float>&, const ConvWeightShape&);
template std::vector<double> ohwi_to_oihw(const std::vector<double>&, const ConvWeightShape&);
template std::vector<float> oihw_to_ohwi(const std::vector<float>&, const ConvWeightShape&);
template std::vector<double> oihw_to_ohwi(const std::vector<double>&, const ConvWeightShape&);

}  // namespace train::model_io
