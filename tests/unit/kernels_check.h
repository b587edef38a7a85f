#pragma once
// tests/unit/kernels_check.h: what the kernel tests share (a Caffe-style gradient checker, random
// tensors, error measures). Every op is checked two ways:
//   1. fp64 gradients against central finite differences (five-point stencil) of a scalar loss
//      L = sum(output * r), r random, computed by the op's own double instantiation: worst element of
//        |analytic - numeric| / max(|analytic|, |numeric|, 1e-3 * max|numeric|)  <=  kFiniteDifferenceTol
//   2. the fp32 op against a naive loop reference written in the test (in double):
//        max|fp32 - reference| / max|reference|  <=  kFloatTol

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace kcheck {

inline constexpr double kFiniteDifferenceTol = 1e-6;  // fp64 analytic vs central differences
inline constexpr double kFloatTol = 1e-5;             // fp32 op vs fp64 naive reference (max-norm relative)
inline constexpr double kStep = 1e-4;                 // central-difference step (five-point stencil)

inline std::vector<double> random_vector(std::size_t n, std::mt19937_64& rng, double lo = -1.0, double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  return v;
}

// n distinct values spread over [-1, 1] in random order: 2/n apart, none within 0.5/n of zero (so no ties
// and no kinks within a finite-difference step for max pool and ReLU).
inline std::vector<double> distinct_vector(std::size_t n, std::mt19937_64& rng) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = -1.0 + 2.0 * (static_cast<double>(i) + 0.25) / static_cast<double>(n);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

template <typename T>
std::vector<T> cast(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

template <typename T>
std::vector<double> widen(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// Output buffers start as NaN: an op that reads instead of overwriting shows.
template <typename T>
std::vector<T> nan_vector(std::size_t n) {
  return std::vector<T>(n, std::numeric_limits<T>::quiet_NaN());
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// max|a - ref| / max|ref| (NaN anywhere gives infinity).
template <typename A>
double max_rel_error(const std::vector<A>& a, const std::vector<double>& ref) {
  if (a.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double diff = 0.0, scale = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - ref[i]);
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, d);
    scale = std::max(scale, std::fabs(ref[i]));
  }
  return scale == 0.0 ? diff : diff / scale;
}

// Central differences of loss() with respect to every element of v (restored afterwards), compared with
// analytic. The five-point stencil (f(-2h) - 8 f(-h) + 8 f(h) - f(2h)) / 12h is exact to O(h^4), so a step
// of 1e-4 keeps truncation (~1e-16) and rounding (~1e-16 * |L| / h) errors far below the tolerance.
// Returns the worst relative error as described at the top.
inline double finite_difference_error(std::vector<double>& v, const std::vector<double>& analytic,
                                      const std::function<double()>& loss, double step = kStep) {
  if (v.size() != analytic.size()) return std::numeric_limits<double>::infinity();
  std::vector<double> numeric(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double saved = v[i];
    auto at = [&](double offset) {
      v[i] = saved + offset;
      return loss();
    };
    const double plus1 = at(step), minus1 = at(-step), plus2 = at(2 * step), minus2 = at(-2 * step);
    v[i] = saved;
    numeric[i] = (8.0 * (plus1 - minus1) - (plus2 - minus2)) / (12.0 * step);
  }
  double scale = 0.0;
  for (double x : numeric) scale = std::max(scale, std::fabs(x));
  double worst = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double denom = std::max({std::fabs(analytic[i]), std::fabs(numeric[i]), 1e-3 * scale, 1e-12});
    const double err = std::fabs(analytic[i] - numeric[i]) / denom;
    if (std::isnan(err)) return std::numeric_limits<double>::infinity();
    worst = std::max(worst, err);
  }
  return worst;
}

template <typename T>
bool bit_identical(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](T x, T y) { return std::memcmp(&x, &y, sizeof(T)) == 0; });
}

}  // namespace kcheck
