// Pooling: max pooling and global average pooling (kernels/cpu/pool.cpp).
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>

#include <limits>

using train::kernels::Pool2dShape;
namespace kernels = train::kernels;

namespace {

// The definition: max over the window's real elements, first winner in (kh, kw) order; dy routed back.
void naive(const Pool2dShape& s, const std::vector<double>& x, const std::vector<double>& dy, std::vector<double>& y,
           std::vector<double>& dx) {
  const int ho = s.out_h(), wo = s.out_w();
  y.assign(s.y_size(), 0.0);
  dx.assign(s.x_size(), 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int oh = 0; oh < ho; ++oh)
      for (int ow = 0; ow < wo; ++ow)
        for (int c = 0; c < s.c; ++c) {
          double best = -std::numeric_limits<double>::infinity();
          std::size_t where = 0;
          for (int kh = 0; kh < s.kernel; ++kh)
            for (int kw = 0; kw < s.kernel; ++kw) {
              const int ih = oh * s.stride - s.pad + kh, iw = ow * s.stride - s.pad + kw;
              if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
              const std::size_t xi = ((std::size_t(n) * s.h + ih) * s.w + iw) * s.c + c;
              if (x[xi] > best) best = x[xi], where = xi;
            }
          const std::size_t yi = ((std::size_t(n) * ho + oh) * wo + ow) * s.c + c;
          y[yi] = best;
          dx[where] += dy[yi];
        }
}

const std::vector<Pool2dShape> shapes = {
    {2, 7, 7, 3, 3, 2, 1},   // ResNet's stem pool on an odd size
    {2, 8, 6, 2, 3, 2, 1},   // even sizes
    {1, 5, 9, 2, 2, 2, 0},   // 2x2/2 without padding
    {2, 5, 5, 3, 3, 1, 1},   // overlapping windows, stride 1
    {1, 9, 7, 2, 5, 3, 2},   // kernel 5, stride 3
};

}  // namespace

TEST_CASE("max_pool: fp64 gradient matches central finite differences", "[kernels][max_pool]") {
  std::mt19937_64 rng(61);
  for (const Pool2dShape& s : shapes) {
    INFO("n " << s.n << " " << s.h << "x" << s.w << "x" << s.c << " kernel " << s.kernel << " stride " << s.stride
              << " pad " << s.pad);
    std::vector<double> x = kcheck::distinct_vector(s.x_size(), rng);  // no ties within a step
    const std::vector<double> r = kcheck::random_vector(s.y_size(), rng);
    std::vector<std::int32_t> argmax(s.y_size());
    auto loss = [&] {
      std::vector<double> y(s.y_size());
      kernels::max_pool_forward<double>(s, x.data(), y.data(), argmax.data());
      return kcheck::dot(y, r);
    };
    std::vector<double> y(s.y_size());
    kernels::max_pool_forward<double>(s, x.data(), y.data(), argmax.data());
    auto dx = kcheck::nan_vector<double>(s.x_size());
    kernels::max_pool_backward<double>(s, r.data(), argmax.data(), dx.data());
    CHECK(kcheck::finite_difference_error(x, dx, loss) < kcheck::kFiniteDifferenceTol);
  }
}

TEST_CASE("max_pool: fp32 matches the naive loops", "[kernels][max_pool]") {
  std::mt19937_64 rng(62);
  std::vector<Pool2dShape> cases = shapes;
  cases.push_back({4, 56, 56, 64, 3, 2, 1});  // ResNet-50: 112x112 -> 56x56 at a quarter size
  cases.push_back({2, 112, 112, 64, 3, 2, 1});
  for (const Pool2dShape& s : cases) {
    INFO("n " << s.n << " " << s.h << "x" << s.w << "x" << s.c);
    const auto x = kcheck::cast<float>(kcheck::random_vector(s.x_size(), rng));
    const auto dy = kcheck::cast<float>(kcheck::random_vector(s.y_size(), rng));
    std::vector<double> ref_y, ref_dx;
    naive(s, kcheck::widen(x), kcheck::widen(dy), ref_y, ref_dx);
    auto y = kcheck::nan_vector<float>(s.y_size()), dx = kcheck::nan_vector<float>(s.x_size());
    std::vector<std::int32_t> argmax(s.y_size(), -7);
    kernels::max_pool_forward<float>(s, x.data(), y.data(), argmax.data());
    kernels::max_pool_backward<float>(s, dy.data(), argmax.data(), dx.data());
    CHECK(kcheck::max_rel_error(y, ref_y) == 0.0);  // a max is exact
    CHECK(kcheck::max_rel_error(dx, ref_dx) < kcheck::kFloatTol);
  }
}

TEST_CASE("max_pool: ties go to the first element, padding never wins", "[kernels][max_pool]") {
  const Pool2dShape s{1, 4, 4, 1, 3, 2, 1};  // 2x2 output
  std::vector<float> x(16, -5.0f);           // all equal and negative: padding (-inf) must lose
  std::vector<float> y(4);
  std::vector<std::int32_t> argmax(4);
  kernels::max_pool_forward<float>(s, x.data(), y.data(), argmax.data());
  for (float v : y) CHECK(v == -5.0f);
  // Window (oh, ow) starts at input (2 * oh - 1, 2 * ow - 1); its first real element wins.
  CHECK(argmax == std::vector<std::int32_t>{0 * 4 + 0, 0 * 4 + 1, 1 * 4 + 0, 1 * 4 + 1});
  // Overlapping windows both choose input (1, 1): its gradient is the sum.
  std::vector<float> x2(16, 0.0f);
  x2[1 * 4 + 1] = 1.0f;
  kernels::max_pool_forward<float>(s, x2.data(), y.data(), argmax.data());
  const std::vector<float> dy = {1.0f, 2.0f, 3.0f, 4.0f};
  std::vector<float> dx(16);
  kernels::max_pool_backward<float>(s, dy.data(), argmax.data(), dx.data());
  CHECK(dx[1 * 4 + 1] == 1.0f + 2.0f + 3.0f + 4.0f);
}

TEST_CASE("global_avg_pool: fp64 gradient matches central finite differences", "[kernels][avg_pool]") {
  std::mt19937_64 rng(51);
  for (auto [n, hw, c] : {std::tuple{2, 7 * 7, 5}, std::tuple{3, 1, 4}, std::tuple{1, 3 * 5, 2}}) {
    INFO("n " << n << " hw " << hw << " c " << c);
    std::vector<double> x = kcheck::random_vector(std::size_t(n) * hw * c, rng);
    const std::vector<double> r = kcheck::random_vector(std::size_t(n) * c, rng);
    auto loss = [&, n = n, hw = hw, c = c] {
      std::vector<double> y(std::size_t(n) * c);
      kernels::global_avg_pool_forward<double>(n, hw, c, x.data(), y.data());
      return kcheck::dot(y, r);
    };
    auto dx = kcheck::nan_vector<double>(x.size());
    kernels::global_avg_pool_backward<double>(n, hw, c, r.data(), dx.data());
    CHECK(kcheck::finite_difference_error(x, dx, loss) < kcheck::kFiniteDifferenceTol);
  }
}

TEST_CASE("global_avg_pool: fp32 matches the naive loops", "[kernels][avg_pool]") {
  std::mt19937_64 rng(52);
  const int n = 8, hw = 7 * 7, c = 2048;  // ResNet-50's head
  const auto x = kcheck::cast<float>(kcheck::random_vector(std::size_t(n) * hw * c, rng));
  const auto dy = kcheck::cast<float>(kcheck::random_vector(std::size_t(n) * c, rng));
  std::vector<double> ref_y(std::size_t(n) * c, 0.0), ref_dx(x.size());
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < hw; ++p)
      for (int j = 0; j < c; ++j) {
        ref_y[std::size_t(i) * c + j] += double(x[(std::size_t(i) * hw + p) * c + j]) / hw;
        ref_dx[(std::size_t(i) * hw + p) * c + j] = double(dy[std::size_t(i) * c + j]) / hw;
      }
  auto y = kcheck::nan_vector<float>(ref_y.size()), dx = kcheck::nan_vector<float>(x.size());
  kernels::global_avg_pool_forward<float>(n, hw, c, x.data(), y.data());
  kernels::global_avg_pool_backward<float>(n, hw, c, dy.data(), dx.data());
  CHECK(kcheck::max_rel_error(y, ref_y) < kcheck::kFloatTol);
  CHECK(kcheck::max_rel_error(dx, ref_dx) < kcheck::kFloatTol);
}
