// Fully connected layer (kernels/cpu/fully_connected.cpp).
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>

namespace kernels = train::kernels;

namespace {

void naive(int n, int in, int out, const std::vector<double>& x, const std::vector<double>& w,
           const std::vector<double>& b, const std::vector<double>& dy, std::vector<double>& y, std::vector<double>& dx,
           std::vector<double>& dw, std::vector<double>& db) {
  y.assign(std::size_t(n) * out, 0.0);
  dx.assign(std::size_t(n) * in, 0.0);
  dw.assign(std::size_t(out) * in, 0.0);
  db.assign(out, 0.0);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double acc = b[o];
      for (int k = 0; k < in; ++k) acc += x[std::size_t(i) * in + k] * w[std::size_t(o) * in + k];
      y[std::size_t(i) * out + o] = acc;
      const double g = dy[std::size_t(i) * out + o];
      db[o] += g;
      for (int k = 0; k < in; ++k) {
        dx[std::size_t(i) * in + k] += g * w[std::size_t(o) * in + k];
        dw[std::size_t(o) * in + k] += g * x[std::size_t(i) * in + k];
      }
    }
}

}  // namespace

TEST_CASE("fully_connected: fp64 gradients match central finite differences", "[kernels][fully_connected]") {
  std::mt19937_64 rng(71);
  for (auto [n, in, out] : {std::tuple{3, 5, 4}, std::tuple{1, 7, 3}, std::tuple{4, 16, 10}}) {
    INFO("n " << n << " in " << in << " out " << out);
    std::vector<double> x = kcheck::random_vector(std::size_t(n) * in, rng);
    std::vector<double> w = kcheck::random_vector(std::size_t(out) * in, rng);
    std::vector<double> b = kcheck::random_vector(out, rng);
    const std::vector<double> r = kcheck::random_vector(std::size_t(n) * out, rng);
    auto loss = [&, n = n, in = in, out = out] {
      std::vector<double> y(std::size_t(n) * out);
      kernels::fully_connected_forward<double>(n, in, out, x.data(), w.data(), b.data(), y.data());
      return kcheck::dot(y, r);
    };
    auto dx = kcheck::nan_vector<double>(x.size()), dw = kcheck::nan_vector<double>(w.size());
    auto db = kcheck::nan_vector<double>(b.size());
    kernels::fully_connected_backward<double>(n, in, out, x.data(), w.data(), r.data(), dx.data(), dw.data(),
                                              db.data());
    CHECK(kcheck::finite_difference_error(x, dx, loss) < kcheck::kFiniteDifferenceTol);
    CHECK(kcheck::finite_difference_error(w, dw, loss) < kcheck::kFiniteDifferenceTol);
    CHECK(kcheck::finite_difference_error(b, db, loss) < kcheck::kFiniteDifferenceTol);
  }
}

TEST_CASE("fully_connected: fp32 matches the naive loops", "[kernels][fully_connected]") {
  std::mt19937_64 rng(72);
  for (auto [n, in, out] : {std::tuple{16, 2048, 1000}, std::tuple{5, 33, 7}, std::tuple{64, 96, 10}}) {
    INFO("n " << n << " in " << in << " out " << out);
    const auto x = kcheck::cast<float>(kcheck::random_vector(std::size_t(n) * in, rng));
    const auto w = kcheck::cast<float>(kcheck::random_vector(std::size_t(out) * in, rng));
    const auto b = kcheck::cast<float>(kcheck::random_vector(out, rng));
    const auto dy = kcheck::cast<float>(kcheck::random_vector(std::size_t(n) * out, rng));
    std::vector<double> ry, rdx, rdw, rdb;
    naive(n, in, out, kcheck::widen(x), kcheck::widen(w), kcheck::widen(b), kcheck::widen(dy), ry, rdx, rdw, rdb);
    auto y = kcheck::nan_vector<float>(ry.size()), dx = kcheck::nan_vector<float>(rdx.size());
    auto dw = kcheck::nan_vector<float>(rdw.size()), db = kcheck::nan_vector<float>(rdb.size());
    kernels::fully_connected_forward<float>(n, in, out, x.data(), w.data(), b.data(), y.data());
    kernels::fully_connected_backward<float>(n, in, out, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                                             db.data());
    CHECK(kcheck::max_rel_error(y, ry) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(dx, rdx) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(dw, rdw) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(db, rdb) < kcheck::kFloatTol);
    // No bias, no dx, no db: y is x * w^T alone and dw is unchanged.
    std::vector<double> ry0 = ry;
    for (int i = 0; i < n; ++i)
      for (int o = 0; o < out; ++o) ry0[std::size_t(i) * out + o] -= double(b[o]);
    auto y0 = kcheck::nan_vector<float>(ry.size()), dw0 = kcheck::nan_vector<float>(rdw.size());
    kernels::fully_connected_forward<float>(n, in, out, x.data(), w.data(), nullptr, y0.data());
    kernels::fully_connected_backward<float>(n, in, out, x.data(), w.data(), dy.data(), nullptr, dw0.data(), nullptr);
    CHECK(kcheck::max_rel_error(y0, ry0) < kcheck::kFloatTol);
    CHECK(kcheck::bit_identical(dw0, dw));
  }
}
