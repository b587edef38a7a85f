// Batch norm (kernels/cpu/batch_norm.cpp): training forward with running statistics, backward, inference.
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>

namespace kernels = train::kernels;

namespace {

struct NaiveBatchNorm {  // the definition, in double, straight from the formulas of kernels/ops.h
  std::vector<double> y, mean, invstd, running_mean, running_var, dx, dgamma, dbeta;
};

NaiveBatchNorm naive(std::int64_t rows, int c, const std::vector<double>& x, const std::vector<double>& gamma,
                     const std::vector<double>& beta, const std::vector<double>& dy, double eps, double momentum,
                     const std::vector<double>& running_mean, const std::vector<double>& running_var) {
  NaiveBatchNorm r;
  r.y.assign(x.size(), 0.0);
  r.dx.assign(x.size(), 0.0);
  r.mean.assign(c, 0.0);
  r.invstd.assign(c, 0.0);
  r.running_mean = running_mean;
  r.running_var = running_var;
  r.dgamma.assign(c, 0.0);
  r.dbeta.assign(c, 0.0);
  for (int j = 0; j < c; ++j) {
    double sum = 0.0;
    for (std::int64_t i = 0; i < rows; ++i) sum += x[i * c + j];
    const double mean = sum / rows;
    double sq = 0.0;
    for (std::int64_t i = 0; i < rows; ++i) sq += (x[i * c + j] - mean) * (x[i * c + j] - mean);
    const double var = sq / rows;
    const double invstd = 1.0 / std::sqrt(var + eps);
    r.mean[j] = mean;
    r.invstd[j] = invstd;
    r.running_mean[j] = (1 - momentum) * running_mean[j] + momentum * mean;
    r.running_var[j] = (1 - momentum) * running_var[j] + momentum * sq / (rows - 1);
    double db = 0.0, dg = 0.0;
    for (std::int64_t i = 0; i < rows; ++i) {
      const double xhat = (x[i * c + j] - mean) * invstd;
      r.y[i * c + j] = xhat * gamma[j] + beta[j];
      db += dy[i * c + j];
      dg += dy[i * c + j] * xhat;
    }
    r.dbeta[j] = db;
    r.dgamma[j] = dg;
    for (std::int64_t i = 0; i < rows; ++i) {
      const double xhat = (x[i * c + j] - mean) * invstd;
      r.dx[i * c + j] = gamma[j] * invstd * (dy[i * c + j] - db / rows - xhat * dg / rows);
    }
  }
  return r;
}

}  // namespace

TEST_CASE("batch_norm: fp64 training-mode gradients match central finite differences", "[kernels][batch_norm]") {
  std::mt19937_64 rng(21);
  const double eps = 1e-5;
  for (auto [rows, c] : {std::pair<std::int64_t, int>{2 * 3 * 5, 4}, {7, 3}, {2, 5}, {2 * 7 * 7, 6}}) {
    INFO("rows " << rows << " channels " << c);
    std::vector<double> x = kcheck::random_vector(rows * c, rng, -2.0, 3.0);
    std::vector<double> gamma = kcheck::random_vector(c, rng, 0.5, 1.5);
    std::vector<double> beta = kcheck::random_vector(c, rng);
    const std::vector<double> r = kcheck::random_vector(rows * c, rng);
    auto loss = [&] {
      std::vector<double> y(x.size()), m(c), v(c);
      kernels::batch_norm_forward_train<double>(rows, c, x.data(), gamma.data(), beta.data(), eps, 0.1, nullptr,
                                                nullptr, y.data(), m.data(), v.data());
      return kcheck::dot(y, r);
    };
    std::vector<double> y(x.size()), mean(c), invstd(c);
    kernels::batch_norm_forward_train<double>(rows, c, x.data(), gamma.data(), beta.data(), eps, 0.1, nullptr, nullptr,
                                              y.data(), mean.data(), invstd.data());
    auto dx = kcheck::nan_vector<double>(x.size());
    auto dgamma = kcheck::nan_vector<double>(c), dbeta = kcheck::nan_vector<double>(c);
    kernels::batch_norm_backward<double>(rows, c, x.data(), r.data(), gamma.data(), mean.data(), invstd.data(),
                                         dx.data(), dgamma.data(), dbeta.data());
    CHECK(kcheck::finite_difference_error(x, dx, loss) < kcheck::kFiniteDifferenceTol);
    CHECK(kcheck::finite_difference_error(gamma, dgamma, loss) < kcheck::kFiniteDifferenceTol);
    CHECK(kcheck::finite_difference_error(beta, dbeta, loss) < kcheck::kFiniteDifferenceTol);
  }
}

TEST_CASE("batch_norm: fp32 matches the naive formulas", "[kernels][batch_norm]") {
  std::mt19937_64 rng(22);
  const float eps = 1e-5f, momentum = 0.1f;
  // NHWC activations of ResNet-like shapes; x offset from zero so a large mean is part of the test.
  for (auto [rows, c] : {std::pair<std::int64_t, int>{4 * 14 * 14, 64}, {2 * 7 * 7, 256}, {3 * 5 * 5, 3},
                         {8 * 56 * 56, 16}}) {
    INFO("rows " << rows << " channels " << c);
    const auto x = kcheck::cast<float>(kcheck::random_vector(rows * c, rng, 1.0, 4.0));
    const auto dy = kcheck::cast<float>(kcheck::random_vector(rows * c, rng));
    const auto gamma = kcheck::cast<float>(kcheck::random_vector(c, rng, 0.5, 1.5));
    const auto beta = kcheck::cast<float>(kcheck::random_vector(c, rng));
    const auto rm0 = kcheck::cast<float>(kcheck::random_vector(c, rng));
    const auto rv0 = kcheck::cast<float>(kcheck::random_vector(c, rng, 0.5, 2.0));
    auto rm = rm0, rv = rv0;
    auto y = kcheck::nan_vector<float>(x.size()), dx = kcheck::nan_vector<float>(x.size());
    auto mean = kcheck::nan_vector<float>(c), invstd = kcheck::nan_vector<float>(c);
    auto dgamma = kcheck::nan_vector<float>(c), dbeta = kcheck::nan_vector<float>(c);
    kernels::batch_norm_forward_train<float>(rows, c, x.data(), gamma.data(), beta.data(), eps, momentum, rm.data(),
                                             rv.data(), y.data(), mean.data(), invstd.data());
    kernels::batch_norm_backward<float>(rows, c, x.data(), dy.data(), gamma.data(), mean.data(), invstd.data(),
                                        dx.data(), dgamma.data(), dbeta.data());
    const NaiveBatchNorm ref = naive(rows, c, kcheck::widen(x), kcheck::widen(gamma), kcheck::widen(beta),
                                     kcheck::widen(dy), eps, momentum, kcheck::widen(rm0), kcheck::widen(rv0));
    CHECK(kcheck::max_rel_error(y, ref.y) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(mean, ref.mean) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(invstd, ref.invstd) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(rm, ref.running_mean) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(rv, ref.running_var) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(dx, ref.dx) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(dgamma, ref.dgamma) < kcheck::kFloatTol);
    CHECK(kcheck::max_rel_error(dbeta, ref.dbeta) < kcheck::kFloatTol);
  }
}

TEST_CASE("batch_norm: running statistics follow PyTorch (momentum 0.1, unbiased variance)", "[kernels][batch_norm]") {
  // One channel, x = 1, 2, 3, 4: mean 2.5, biased variance 1.25 (normalises), unbiased 5/3 (running).
  const std::vector<double> x = {1, 2, 3, 4};
  const std::vector<double> gamma = {2.0}, beta = {0.5};
  std::vector<double> rm = {0.0}, rv = {1.0}, y(4), mean(1), invstd(1);
  kernels::batch_norm_forward_train<double>(4, 1, x.data(), gamma.data(), beta.data(), 1e-5, 0.1, rm.data(), rv.data(),
                                            y.data(), mean.data(), invstd.data());
  CHECK(mean[0] == Approx(2.5).epsilon(1e-15));
  CHECK(invstd[0] == Approx(1.0 / std::sqrt(1.25 + 1e-5)).epsilon(1e-15));
  CHECK(rm[0] == Approx(0.25).epsilon(1e-15));                      // 0.9 * 0 + 0.1 * 2.5
  CHECK(rv[0] == Approx(0.9 + 0.1 * 5.0 / 3.0).epsilon(1e-15));      // 0.9 * 1 + 0.1 * 5/3
  CHECK(y[0] == Approx(-1.5 / std::sqrt(1.25 + 1e-5) * 2.0 + 0.5).epsilon(1e-15));
  // A second step compounds: running_mean = 0.9 * 0.25 + 0.1 * 2.5.
  kernels::batch_norm_forward_train<double>(4, 1, x.data(), gamma.data(), beta.data(), 1e-5, 0.1, rm.data(), rv.data(),
                                            y.data(), mean.data(), invstd.data());
  CHECK(rm[0] == Approx(0.475).epsilon(1e-15));
  CHECK(rv[0] == Approx(0.9 * (0.9 + 0.1 * 5.0 / 3.0) + 0.1 * 5.0 / 3.0).epsilon(1e-15));
  // Fp32, as ResNet runs it: the same values to float precision.
  const std::vector<float> xf = {1, 2, 3, 4}, gf = {2.0f}, bf = {0.5f};
  std::vector<float> rmf = {0.0f}, rvf = {1.0f}, yf(4), mf(1), sf(1);
  kernels::batch_norm_forward_train<float>(4, 1, xf.data(), gf.data(), bf.data(), 1e-5f, 0.1f, rmf.data(), rvf.data(),
                                           yf.data(), mf.data(), sf.data());
  CHECK(rmf[0] == Approx(0.25).epsilon(1e-7));
  CHECK(rvf[0] == Approx(0.9 + 0.1 * 5.0 / 3.0).epsilon(1e-7));
}

TEST_CASE("batch_norm: inference mode uses the running statistics", "[kernels][batch_norm]") {
  std::mt19937_64 rng(23);
  const std::int64_t rows = 3 * 4 * 5;
  const int c = 7;
  const auto x = kcheck::random_vector(rows * c, rng, -3.0, 3.0);
  const auto gamma = kcheck::random_vector(c, rng), beta = kcheck::random_vector(c, rng);
  const auto rm = kcheck::random_vector(c, rng), rv = kcheck::random_vector(c, rng, 0.1, 2.0);
  std::vector<double> ref(x.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < c; ++j)
      ref[i * c + j] = (x[i * c + j] - rm[j]) / std::sqrt(rv[j] + 1e-5) * gamma[j] + beta[j];
  auto y = kcheck::nan_vector<double>(x.size());
  kernels::batch_norm_forward_inference<double>(rows, c, x.data(), gamma.data(), beta.data(), rm.data(), rv.data(),
                                                1e-5, y.data());
  CHECK(kcheck::max_rel_error(y, ref) < 1e-14);
  const auto xf = kcheck::cast<float>(x);
  auto yf = xf;  // in place
  const auto gf = kcheck::cast<float>(gamma), bf = kcheck::cast<float>(beta);
  const auto rmf = kcheck::cast<float>(rm), rvf = kcheck::cast<float>(rv);
  kernels::batch_norm_forward_inference<float>(rows, c, yf.data(), gf.data(), bf.data(), rmf.data(), rvf.data(), 1e-5f,
                                               yf.data());
  std::vector<double> reff(x.size());
  for (std::int64_t i = 0; i < rows; ++i)
    for (int j = 0; j < c; ++j)
      reff[i * c + j] = (double(xf[i * c + j]) - rmf[j]) / std::sqrt(double(rvf[j]) + double(1e-5f)) * gf[j] + bf[j];
  CHECK(kcheck::max_rel_error(yf, reff) < kcheck::kFloatTol);
}

TEST_CASE("batch_norm: results do not depend on the thread count", "[kernels][batch_norm]") {
  std::mt19937_64 rng(24);
  const std::int64_t rows = 4 * 28 * 28;
  const int c = 64;
  const auto x = kcheck::cast<float>(kcheck::random_vector(rows * c, rng));
  const auto dy = kcheck::cast<float>(kcheck::random_vector(rows * c, rng));
  const std::vector<float> gamma(c, 1.0f), beta(c, 0.0f);
  auto run = [&] {
    std::vector<float> rm(c, 0.0f), rv(c, 1.0f), y(x.size()), m(c), s(c), dx(x.size()), dg(c), db(c);
    kernels::batch_norm_forward_train<float>(rows, c, x.data(), gamma.data(), beta.data(), 1e-5f, 0.1f, rm.data(),
                                             rv.data(), y.data(), m.data(), s.data());
    kernels::batch_norm_backward<float>(rows, c, x.data(), dy.data(), gamma.data(), m.data(), s.data(), dx.data(),
                                        dg.data(), db.data());
    for (const auto* v : {&rm, &rv, &m, &s, &dx, &dg, &db}) y.insert(y.end(), v->begin(), v->end());
    return y;
  };
  const int threads = omp_get_max_threads();
  const auto parallel = run();
  CHECK(kcheck::bit_identical(parallel, run()));
  omp_set_num_threads(1);
  const auto serial = run();
  omp_set_num_threads(threads);
  CHECK(kcheck::bit_identical(parallel, serial));
}

TEST_CASE("batch_norm: one value per channel is refused in training mode", "[kernels][batch_norm]") {
  std::vector<float> v(8, 1.0f);
  CHECK_THROWS_AS(kernels::batch_norm_forward_train<float>(1, 2, v.data(), v.data(), v.data(), 1e-5f, 0.1f, nullptr,
                                                           nullptr, v.data(), v.data(), v.data()),
                  std::invalid_argument);
}
