#include "runtime/model_io/layout.h"

#include <fmt/format.h>

#include <stdexcept>

namespace train::model_io {

namespace {

// Both layouts keep each output channel's values together; within one they are a [rows][cols] matrix that
// the other layout stores transposed: [kh*kw][in] (OHWI) against [in][kh*kw] (OIHW).
template <typename T>
void transpose_per_output(const T* src, T* dst, int64_t outputs, int64_t rows, int64_t cols) {
  for (int64_t o = 0; o < outputs; ++o) {
    const T* from = src + o * rows * cols;
    T* to = dst + o * rows * cols;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) to[c * rows + r] = from[r * cols + c];
    }
  }
}

template <typename T>
std::vector<T> transposed_per_output(const std::vector<T>& src, const ConvWeightShape& shape, int64_t rows,
                                     int64_t cols) {
  if (static_cast<int64_t>(src.size()) != shape.elements()) {
    throw std::invalid_argument(fmt::format("convolution weight [{}, {}, {}, {}] needs {} values, got {}", shape.out,
                                            shape.in, shape.kh, shape.kw, shape.elements(), src.size()));
  }
  std::vector<T> dst(src.size());
  transpose_per_output(src.data(), dst.data(), shape.out, rows, cols);
  return dst;
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
  transpose_per_output(src, dst, s.out, s.kh * s.kw, s.in);
}

template <typename T>
void oihw_to_ohwi(const T* src, T* dst, const ConvWeightShape& s) {
  transpose_per_output(src, dst, s.out, s.in, s.kh * s.kw);
}

template <typename T>
std::vector<T> ohwi_to_oihw(const std::vector<T>& src, const ConvWeightShape& shape) {
  return transposed_per_output(src, shape, shape.kh * shape.kw, shape.in);
}

template <typename T>
std::vector<T> oihw_to_ohwi(const std::vector<T>& src, const ConvWeightShape& shape) {
  return transposed_per_output(src, shape, shape.in, shape.kh * shape.kw);
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
