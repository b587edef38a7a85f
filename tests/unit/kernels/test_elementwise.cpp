// The elementwise ops: the residual add and ReLU (kernels/cpu/elementwise.cpp).
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>

#include <cmath>

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

TEST_CASE("relu: fp64 gradient matches central finite differences", "[kernels][relu]") {
  std::mt19937_64 rng(31);
  for (std::int64_t count : {1, 7, 2 * 5 * 3 * 4}) {
    INFO("count " << count);
    std::vector<double> x = kcheck::distinct_vector(count, rng);  // no value within a step of the kink
    const std::vector<double> r = kcheck::random_vector(count, rng);
    auto loss = [&] {
      std::vector<double> y(count);
      kernels::relu_forward<double>(count, x.data(), y.data());
      return kcheck::dot(y, r);
    };
    std::vector<double> y(count);
    kernels::relu_forward<double>(count, x.data(), y.data());
    auto dx = kcheck::nan_vector<double>(count);
    kernels::relu_backward<double>(count, y.data(), r.data(), dx.data());
    CHECK(kcheck::finite_difference_error(x, dx, loss) < kcheck::kFiniteDifferenceTol);
  }
}

TEST_CASE("relu: fp32 matches the naive loop, in place too", "[kernels][relu]") {
  std::mt19937_64 rng(32);
  const std::int64_t count = 3 * 28 * 28 * 64 + 5;  // large enough to run on every thread, odd length
  const auto x = kcheck::cast<float>(kcheck::random_vector(count, rng));
  const auto dy = kcheck::cast<float>(kcheck::random_vector(count, rng));
  std::vector<double> ref_y(count), ref_dx(count);
  for (std::int64_t i = 0; i < count; ++i) {
    ref_y[i] = x[i] > 0 ? x[i] : 0.0;
    ref_dx[i] = x[i] > 0 ? dy[i] : 0.0;
  }
  auto y = kcheck::nan_vector<float>(count), dx = kcheck::nan_vector<float>(count);
  kernels::relu_forward<float>(count, x.data(), y.data());
  kernels::relu_backward<float>(count, y.data(), dy.data(), dx.data());
  CHECK(kcheck::max_rel_error(y, ref_y) == 0.0);
  CHECK(kcheck::max_rel_error(dx, ref_dx) == 0.0);
  auto inplace = x;
  kernels::relu_forward<float>(count, inplace.data(), inplace.data());
  CHECK(kcheck::bit_identical(inplace, y));
  auto grad = dy;
  kernels::relu_backward<float>(count, y.data(), grad.data(), grad.data());
  CHECK(kcheck::bit_identical(grad, dx));
}

TEST_CASE("relu: NaN propagates as in PyTorch", "[kernels][relu]") {
  const std::vector<float> x = {NAN, -1.0f, 0.0f, 2.0f};
  std::vector<float> y(4), dx(4);
  const std::vector<float> dy = {1.0f, 1.0f, 1.0f, 1.0f};
  kernels::relu_forward<float>(4, x.data(), y.data());
  CHECK(std::isnan(y[0]));
  CHECK(y[1] == 0.0f);
  CHECK(y[2] == 0.0f);
  CHECK(y[3] == 2.0f);
  kernels::relu_backward<float>(4, y.data(), dy.data(), dx.data());
  CHECK(dx[0] == 1.0f);  // threshold_backward: result <= 0 is false for NaN
  CHECK(dx[1] == 0.0f);
  CHECK(dx[2] == 0.0f);
  CHECK(dx[3] == 1.0f);
}
