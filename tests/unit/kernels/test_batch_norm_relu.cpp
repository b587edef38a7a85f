// Fused batch norm + ReLU (kernels/cpu/batch_norm.cpp): bit-identical to the unfused ops in sequence, and
// gradients that match finite differences.
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>
#include <omp.h>

namespace kernels = train::kernels;

namespace {

struct Inputs {
  std::vector<float> x, shortcut, dy, gamma, beta;
};

Inputs random_inputs(std::int64_t rows, int c, std::mt19937_64& rng) {
  Inputs in;
  in.x = kcheck::cast<float>(kcheck::random_vector(rows * c, rng, -1.0, 2.0));
  in.shortcut = kcheck::cast<float>(kcheck::random_vector(rows * c, rng));
  in.dy = kcheck::cast<float>(kcheck::random_vector(rows * c, rng));
  in.gamma = kcheck::cast<float>(kcheck::random_vector(c, rng, 0.5, 1.5));
  in.beta = kcheck::cast<float>(kcheck::random_vector(c, rng));
  return in;
}

// Every output of forward + backward, concatenated: y, running mean/var, saved mean/invstd, dx, dgamma, dbeta.
using Outputs = std::vector<float>;

Outputs unfused(std::int64_t rows, int c, const Inputs& in, bool residual) {
  const std::size_t size = in.x.size();
  std::vector<float> rm(c, 0.5f), rv(c, 2.0f), bn(size), y(size), m(c), s(c), g(size), dx(size), dg(c), db(c);
  kernels::batch_norm_forward_train<float>(rows, c, in.x.data(), in.gamma.data(), in.beta.data(), 1e-5f, 0.1f,
                                           rm.data(), rv.data(), bn.data(), m.data(), s.data());
  if (residual) kernels::add<float>(static_cast<std::int64_t>(size), bn.data(), in.shortcut.data(), bn.data());
  kernels::relu_forward<float>(static_cast<std::int64_t>(size), bn.data(), y.data());
  kernels::relu_backward<float>(static_cast<std::int64_t>(size), y.data(), in.dy.data(), g.data());
  kernels::batch_norm_backward<float>(rows, c, in.x.data(), g.data(), in.gamma.data(), m.data(), s.data(), dx.data(),
                                      dg.data(), db.data());
  Outputs out = y;
  for (const auto* v : {&rm, &rv, &m, &s, &dx, &dg, &db}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

// The fused forward; the fused backward for plain BN + ReLU, for the residual case what the model does:
// relu_backward (the gradient the shortcut needs too), then batch_norm_backward.
Outputs fused(std::int64_t rows, int c, const Inputs& in, bool residual) {
  const std::size_t size = in.x.size();
  std::vector<float> rm(c, 0.5f), rv(c, 2.0f), y = kcheck::nan_vector<float>(size), m(c), s(c);
  std::vector<float> dx = kcheck::nan_vector<float>(size), dg(c), db(c);
  kernels::batch_norm_relu_forward_train<float>(rows, c, in.x.data(), residual ? in.shortcut.data() : nullptr,
                                                in.gamma.data(), in.beta.data(), 1e-5f, 0.1f, rm.data(), rv.data(),
                                                y.data(), m.data(), s.data());
  if (residual) {
    std::vector<float> g(size);
    kernels::relu_backward<float>(static_cast<std::int64_t>(size), y.data(), in.dy.data(), g.data());
    kernels::batch_norm_backward<float>(rows, c, in.x.data(), g.data(), in.gamma.data(), m.data(), s.data(), dx.data(),
                                        dg.data(), db.data());
  } else {
    kernels::batch_norm_relu_backward<float>(rows, c, in.x.data(), y.data(), in.dy.data(), in.gamma.data(), m.data(),
                                             s.data(), dx.data(), dg.data(), db.data());
  }
  Outputs out = y;
  for (const auto* v : {&rm, &rv, &m, &s, &dx, &dg, &db}) out.insert(out.end(), v->begin(), v->end());
  return out;
}

}  // namespace

TEST_CASE("batch_norm_relu: bit-identical to batch norm, add and ReLU in sequence", "[kernels][batch_norm]") {
  std::mt19937_64 rng(31);
  for (auto [rows, c] : {std::pair<std::int64_t, int>{4 * 14 * 14, 64}, {2 * 7 * 7, 256}, {3 * 5 * 5, 3}, {2, 1}}) {
    const Inputs in = random_inputs(rows, c, rng);
    for (bool residual : {false, true}) {
      INFO("rows " << rows << " channels " << c << (residual ? " with shortcut" : ""));
      CHECK(kcheck::bit_identical(fused(rows, c, in, residual), unfused(rows, c, in, residual)));
    }
  }
}

TEST_CASE("batch_norm_relu: backward in place (dx aliasing dy)", "[kernels][batch_norm]") {
  std::mt19937_64 rng(32);
  const std::int64_t rows = 2 * 9 * 9;
  const int c = 24;
  const Inputs in = random_inputs(rows, c, rng);
  std::vector<float> y(in.x.size()), m(c), s(c), dg(c), db(c), dx(in.x.size());
  kernels::batch_norm_relu_forward_train<float>(rows, c, in.x.data(), nullptr, in.gamma.data(), in.beta.data(), 1e-5f,
                                                0.1f, nullptr, nullptr, y.data(), m.data(), s.data());
  kernels::batch_norm_relu_backward<float>(rows, c, in.x.data(), y.data(), in.dy.data(), in.gamma.data(), m.data(),
                                           s.data(), dx.data(), dg.data(), db.data());
  std::vector<float> in_place = in.dy;
  kernels::batch_norm_relu_backward<float>(rows, c, in.x.data(), y.data(), in_place.data(), in.gamma.data(), m.data(),
                                           s.data(), in_place.data(), dg.data(), db.data());
  CHECK(kcheck::bit_identical(in_place, dx));
}

TEST_CASE("batch_norm_relu: fp64 gradients match central finite differences", "[kernels][batch_norm]") {
  std::mt19937_64 rng(33);
  const double eps = 1e-5;
  for (auto [rows, c] : {std::pair<std::int64_t, int>{2 * 3 * 5, 4}, {7, 3}, {2 * 7 * 7, 6}}) {
    INFO("rows " << rows << " channels " << c);
    // Values well away from the ReLU's kink: a finite-difference step must not cross it.
    std::vector<double> x = kcheck::distinct_vector(rows * c, rng);
    std::vector<double> gamma = kcheck::random_vector(c, rng, 0.5, 1.5);
    std::vector<double> beta = kcheck::random_vector(c, rng, -0.3, 0.3);
    const std::vector<double> r = kcheck::random_vector(rows * c, rng);
    auto loss = [&] {
      std::vector<double> y(x.size()), m(c), v(c);
      kernels::batch_norm_relu_forward_train<double>(rows, c, x.data(), nullptr, gamma.data(), beta.data(), eps, 0.1,
                                                     nullptr, nullptr, y.data(), m.data(), v.data());
      return kcheck::dot(y, r);
    };
    std::vector<double> y(x.size()), mean(c), invstd(c);
    kernels::batch_norm_relu_forward_train<double>(rows, c, x.data(), nullptr, gamma.data(), beta.data(), eps, 0.1,
                                                   nullptr, nullptr, y.data(), mean.data(), invstd.data());
    auto dx = kcheck::nan_vector<double>(x.size());
    auto dgamma = kcheck::nan_vector<double>(c), dbeta = kcheck::nan_vector<double>(c);
    kernels::batch_norm_relu_backward<double>(rows, c, x.data(), y.data(), r.data(), gamma.data(), mean.data(),
                                              invstd.data(), dx.data(), dgamma.data(), dbeta.data());
    // Step small enough that no normalised value crosses zero within it (they are about 1e-2 apart).
    CHECK(kcheck::finite_difference_error(x, dx, loss, 1e-5) < kcheck::kFiniteDifferenceTol);
    CHECK(kcheck::finite_difference_error(gamma, dgamma, loss, 1e-5) < kcheck::kFiniteDifferenceTol);
    CHECK(kcheck::finite_difference_error(beta, dbeta, loss, 1e-5) < kcheck::kFiniteDifferenceTol);
  }
}

TEST_CASE("batch_norm_relu: results do not depend on the thread count", "[kernels][batch_norm]") {
  std::mt19937_64 rng(34);
  const std::int64_t rows = 4 * 28 * 28;
  const int c = 64;
  const Inputs in = random_inputs(rows, c, rng);
  const int threads = omp_get_max_threads();
  const Outputs parallel = fused(rows, c, in, false), parallel_residual = fused(rows, c, in, true);
  omp_set_num_threads(1);
  const Outputs serial = fused(rows, c, in, false), serial_residual = fused(rows, c, in, true);
  omp_set_num_threads(threads);
  CHECK(kcheck::bit_identical(parallel, serial));
  CHECK(kcheck::bit_identical(parallel_residual, serial_residual));
}
