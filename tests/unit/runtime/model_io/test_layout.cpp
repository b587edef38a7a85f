#include "runtime/model_io/layout.h"

#include <catch2/catch.hpp>

#include <numeric>

using namespace train::model_io;

TEST_CASE("layout: OHWI <-> OIHW moves every element to its index", "[model_io]") {
  const ConvWeightShape shape{5, 3, 2, 4};  // out, in, kh, kw: all different, so no mix-up can hide
  std::vector<float> ohwi(shape.elements());
  // Each value encodes its own (o, y, x, i), so the check below is the definition of the layouts.
  for (int64_t o = 0; o < 5; ++o)
    for (int64_t y = 0; y < 2; ++y)
      for (int64_t x = 0; x < 4; ++x)
        for (int64_t i = 0; i < 3; ++i) ohwi[((o * 2 + y) * 4 + x) * 3 + i] = static_cast<float>(o * 1000 + i * 100 + y * 10 + x);

  std::vector<float> oihw = ohwi_to_oihw(ohwi, shape);
  for (int64_t o = 0; o < 5; ++o)
    for (int64_t i = 0; i < 3; ++i)
      for (int64_t y = 0; y < 2; ++y)
        for (int64_t x = 0; x < 4; ++x) {
          INFO(o << " " << i << " " << y << " " << x);
          REQUIRE(oihw[((o * 3 + i) * 2 + y) * 4 + x] == static_cast<float>(o * 1000 + i * 100 + y * 10 + x));
        }
  CHECK(oihw_to_ohwi(oihw, shape) == ohwi);
}

TEST_CASE("layout: 1x1 kernels are a transpose of each output's channels, and 1 input channel changes nothing",
          "[model_io]") {
  std::vector<float> ohwi(6);
  std::iota(ohwi.begin(), ohwi.end(), 0.0f);
  CHECK(ohwi_to_oihw(ohwi, {2, 3, 1, 1}) == ohwi);  // [o][1][1][i] and [o][i][1][1] are the same order
  CHECK(ohwi_to_oihw(ohwi, {1, 1, 2, 3}) == ohwi);
  // [1][h=2][w=1][i=3] -> [1][i=3][2][1]
  CHECK(ohwi_to_oihw(ohwi, {1, 3, 2, 1}) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(oihw_to_ohwi(std::vector<float>{0, 3, 1, 4, 2, 5}, {1, 3, 2, 1}) == ohwi);
}

TEST_CASE("layout: shapes", "[model_io]") {
  auto shape = ConvWeightShape::from_oihw({64, 3, 7, 7});
  CHECK(shape.oihw() == std::vector<int64_t>{64, 3, 7, 7});
  CHECK(shape.ohwi() == std::vector<int64_t>{64, 7, 7, 3});
  CHECK(shape.elements() == 9408);
  CHECK_THROWS_WITH(ConvWeightShape::from_oihw({10, 20}),
                    "a convolution weight has 4 dimensions [out, in, kh, kw], got [10, 20]");
  CHECK_THROWS_WITH(ohwi_to_oihw(std::vector<float>(5), {2, 3, 1, 1}),
                    "convolution weight [2, 3, 1, 1] needs 6 values, got 5");
}
