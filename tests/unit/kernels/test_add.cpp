// Residual add (kernels/cpu/elementwise.cpp).
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>

namespace kernels = train::kernels;

TEST_CASE("add: fp64 gradients are dy for both inputs (central finite differences)", "[kernels][add]") {
  std::mt19937_64 rng(41);
  const std::int64_t count = 2 * 3 * 5 * 4;
  std::vector<double> a = kcheck::random_vector(count, rng), b = kcheck::random_vector(count, rng);
  const std::vector<double> r = kcheck::random_vector(count, rng);
  auto loss = [&] {
    std::vector<double> y(count);
    kernels::add<double>(count, a.data(), b.data(), y.data());
    return kcheck::dot(y, r);
  };
  // The contract: the backward of y = a + b is da = db = dy, no kernel.
  CHECK(kcheck::finite_difference_error(a, r, loss) < kcheck::kFiniteDifferenceTol);
  CHECK(kcheck::finite_difference_error(b, r, loss) < kcheck::kFiniteDifferenceTol);
}

TEST_CASE("add: fp32 matches the naive loop, with y aliasing an input", "[kernels][add]") {
  std::mt19937_64 rng(42);
  const std::int64_t count = 2 * 28 * 28 * 256 + 3;
  const auto a = kcheck::cast<float>(kcheck::random_vector(count, rng));
  const auto b = kcheck::cast<float>(kcheck::random_vector(count, rng));
  std::vector<double> ref(count);
  for (std::int64_t i = 0; i < count; ++i) ref[i] = static_cast<double>(a[i] + b[i]);  // one fp32 rounding
  auto y = kcheck::nan_vector<float>(count);
  kernels::add<float>(count, a.data(), b.data(), y.data());
  CHECK(kcheck::max_rel_error(y, ref) == 0.0);
  auto in_place = a;
  kernels::add<float>(count, in_place.data(), b.data(), in_place.data());
  CHECK(kcheck::bit_identical(in_place, y));
  in_place = b;
  kernels::add<float>(count, a.data(), in_place.data(), in_place.data());
  CHECK(kcheck::bit_identical(in_place, y));
}
