// Softmax cross-entropy with label smoothing (kernels/cpu/cross_entropy.cpp).
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>

#include <cmath>

namespace kernels = train::kernels;

namespace {

// The definition, PyTorch's: (1 - eps) * NLL + eps * mean over classes of -log p, mean over the batch.
double naive_loss(int n, int k, const std::vector<double>& z, const std::vector<std::int32_t>& labels, double eps) {
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += std::exp(z[std::size_t(i) * k + j]);
    std::vector<double> neg_log_p(k);
    for (int j = 0; j < k; ++j) neg_log_p[j] = -std::log(std::exp(z[std::size_t(i) * k + j]) / sum);
    double smooth = 0.0;
    for (int j = 0; j < k; ++j) smooth += neg_log_p[j] / k;
    total += (1.0 - eps) * neg_log_p[labels[i]] + eps * smooth;
  }
  return total / n;
}

}  // namespace

TEST_CASE("softmax_cross_entropy: fp64 gradient matches central finite differences", "[kernels][cross_entropy]") {
  std::mt19937_64 rng(81);
  for (double eps : {0.0, 0.1, 0.5}) {
    for (auto [n, k] : {std::pair{4, 5}, std::pair{1, 3}, std::pair{3, 17}}) {
      INFO("eps " << eps << " n " << n << " classes " << k);
      std::vector<double> z = kcheck::random_vector(std::size_t(n) * k, rng, -3.0, 3.0);
      std::vector<std::int32_t> labels(n);
      for (int i = 0; i < n; ++i) labels[i] = static_cast<std::int32_t>(rng() % k);
      auto loss = [&, n = n, k = k] {
        return kernels::softmax_cross_entropy<double>(n, k, z.data(), labels.data(), eps, nullptr);
      };
      auto dz = kcheck::nan_vector<double>(z.size());
      const double value = kernels::softmax_cross_entropy<double>(n, k, z.data(), labels.data(), eps, dz.data());
      CHECK(value == Approx(naive_loss(n, k, z, labels, eps)).epsilon(1e-13));
      CHECK(kcheck::finite_difference_error(z, dz, loss) < kcheck::kFiniteDifferenceTol);
    }
  }
}

TEST_CASE("softmax_cross_entropy: label smoothing values by hand", "[kernels][cross_entropy]") {
  // Row 0: logits 1, 2, 3, label 0; row 1: logits 0.5, -1, 2, label 2. Values from the definition in
  // Python's math module: lse0 = log(e + e^2 + e^3) = 3.40760596444438,
  //   eps 0.1: 0.9 * (lse0 - 1) + 0.1 * (lse0 - 2) = 2.30760596444438; row 1: 0.39131129665715714.
  const std::vector<double> z = {1, 2, 3, 0.5, -1, 2};
  const std::vector<std::int32_t> labels = {0, 2};
  CHECK(kernels::softmax_cross_entropy<double>(1, 3, z.data(), labels.data(), 0.0, nullptr) ==
        Approx(2.40760596444438).epsilon(1e-14));
  CHECK(kernels::softmax_cross_entropy<double>(1, 3, z.data(), labels.data(), 0.1, nullptr) ==
        Approx(2.30760596444438).epsilon(1e-14));
  std::vector<double> dz(6);
  CHECK(kernels::softmax_cross_entropy<double>(2, 3, z.data(), labels.data(), 0.1, dz.data()) ==
        Approx(1.3494586305507685).epsilon(1e-14));
  // d/dz of row 0 is (p - 0.9 * onehot - 0.1 / 3) / 2 (the mean over two rows).
  CHECK(dz[0] == Approx(-0.8433027601629529 / 2).epsilon(1e-14));
  CHECK(dz[1] == Approx(0.21139513772146437 / 2).epsilon(1e-14));
  CHECK(dz[2] == Approx(0.6319076224414887 / 2).epsilon(1e-14));
  // Uniform logits: every -log p is log(classes), whatever eps.
  const std::vector<float> flat(10, 0.25f);
  const std::vector<std::int32_t> label = {7};
  CHECK(kernels::softmax_cross_entropy<float>(1, 10, flat.data(), label.data(), 0.1f, nullptr) ==
        Approx(std::log(10.0)).epsilon(1e-7));
  // Each gradient row sums to zero.
  double row_sum = dz[3] + dz[4] + dz[5];
  CHECK(std::fabs(row_sum) < 1e-16);
}

TEST_CASE("softmax_cross_entropy: fp32 matches the naive formula, large logits stay finite",
          "[kernels][cross_entropy]") {
  std::mt19937_64 rng(82);
  const int n = 32, k = 1000;
  const auto z = kcheck::cast<float>(kcheck::random_vector(std::size_t(n) * k, rng, -8.0, 8.0));
  std::vector<std::int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = static_cast<std::int32_t>(rng() % k);
  const auto zd = kcheck::widen(z);
  std::vector<double> ref_dz(z.size());
  for (int i = 0; i < n; ++i) {
    double sum = 0.0;
    for (int j = 0; j < k; ++j) sum += std::exp(zd[std::size_t(i) * k + j]);
    for (int j = 0; j < k; ++j)
      ref_dz[std::size_t(i) * k + j] =
          (std::exp(zd[std::size_t(i) * k + j]) / sum - (j == labels[i] ? 0.9 : 0.0) - 0.1 / k) / n;
  }
  auto dz = kcheck::nan_vector<float>(z.size());
  const double loss = kernels::softmax_cross_entropy<float>(n, k, z.data(), labels.data(), 0.1f, dz.data());
  CHECK(loss == Approx(naive_loss(n, k, zd, labels, double(0.1f))).epsilon(kcheck::kFloatTol));
  CHECK(kcheck::max_rel_error(dz, ref_dz) < kcheck::kFloatTol);
  // In place: dlogits over logits.
  auto inplace = z;
  CHECK(kernels::softmax_cross_entropy<float>(n, k, inplace.data(), labels.data(), 0.1f, inplace.data()) == loss);
  CHECK(kcheck::bit_identical(inplace, dz));
  // Logits of 1e4 overflow a naive exp; the shifted form does not.
  const std::vector<float> big = {1e4f, 0.0f, -1e4f};
  const std::vector<std::int32_t> first = {0};
  std::vector<float> dbig(3);
  const double big_loss = kernels::softmax_cross_entropy<float>(1, 3, big.data(), first.data(), 0.1f, dbig.data());
  CHECK(std::isfinite(big_loss));
  CHECK(big_loss == Approx(0.1 * (1e4 + 2e4) / 3).epsilon(1e-6));  // 0.9 * 0 + 0.1 * mean(0, 1e4, 2e4)
  for (float v : dbig) CHECK(std::isfinite(v));
}

TEST_CASE("softmax_cross_entropy: labels outside the classes are refused", "[kernels][cross_entropy]") {
  const std::vector<float> z(6, 0.0f);
  for (std::int32_t bad : {-1, 3}) {
    const std::vector<std::int32_t> labels = {0, bad};
    CHECK_THROWS_AS(kernels::softmax_cross_entropy<float>(2, 3, z.data(), labels.data(), 0.0f, nullptr),
                    std::invalid_argument);
  }
}
