// Global average pooling (kernels/cpu/pool.cpp).
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>

namespace kernels = train::kernels;

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
