// Optimizer step (kernels/cpu/optimizer.cpp): SGD with momentum as torch.optim.SGD, Nesterov, per-tensor
// weight decay, LARS.
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>
#include <omp.h>

#include <cmath>

using train::kernels::SgdOptions;
using train::kernels::SgdTensor;
namespace kernels = train::kernels;

namespace {

template <typename T>
SgdTensor<T> tensor(std::vector<T>& param, const std::vector<T>& grad, std::vector<T>& buf, bool decay) {
  return SgdTensor<T>{param.data(), grad.data(), buf.empty() ? nullptr : buf.data(),
                      static_cast<std::int64_t>(param.size()), decay};
}

void step(std::vector<SgdTensor<double>> tensors, const SgdOptions& o) {
  kernels::sgd_step<double>(std::span<const SgdTensor<double>>(tensors), o);
}

}  // namespace

TEST_CASE("sgd: momentum and weight decay, hand-computed steps", "[kernels][optimizer]") {
  SgdOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  // decayed: g' = 0.5 + 0.1 * 1 = 0.6, buf = 0.6, p = 1 - 0.1 * 0.6 = 0.94;
  //   step 2: g' = 0.5 + 0.094 = 0.594, buf = 0.9 * 0.6 + 0.594 = 1.134, p = 0.94 - 0.1134 = 0.8266
  // not decayed (BN, bias): buf = 0.5, p = 0.95; step 2: buf = 0.95, p = 0.855
  std::vector<double> p1 = {1.0}, g1 = {0.5}, b1 = {0.0};
  std::vector<double> p2 = {1.0}, g2 = {0.5}, b2 = {0.0};
  step({tensor(p1, g1, b1, true), tensor(p2, g2, b2, false)}, o);
  CHECK(p1[0] == Approx(0.94).epsilon(1e-15));
  CHECK(b1[0] == Approx(0.6).epsilon(1e-15));
  CHECK(p2[0] == Approx(0.95).epsilon(1e-15));
  step({tensor(p1, g1, b1, true), tensor(p2, g2, b2, false)}, o);
  CHECK(p1[0] == Approx(0.8266).epsilon(1e-15));
  CHECK(b1[0] == Approx(1.134).epsilon(1e-15));
  CHECK(p2[0] == Approx(0.855).epsilon(1e-15));

  // Nesterov: p -= lr * (g' + momentum * buf): step 1 p = 1 - 0.1 * (0.6 + 0.54) = 0.886;
  //   step 2: g' = 0.5 + 0.0886 = 0.5886, buf = 0.54 + 0.5886 = 1.1286, p = 0.886 - 0.1 * (0.5886 + 1.01574)
  o.nesterov = true;
  std::vector<double> p3 = {1.0}, g3 = {0.5}, b3 = {0.0};
  step({tensor(p3, g3, b3, true)}, o);
  CHECK(p3[0] == Approx(0.886).epsilon(1e-15));
  step({tensor(p3, g3, b3, true)}, o);
  CHECK(b3[0] == Approx(1.1286).epsilon(1e-15));
  CHECK(p3[0] == Approx(0.725566).epsilon(1e-15));

  // No momentum: plain SGD, no buffer needed.
  o.nesterov = false;
  o.momentum = 0.0;
  std::vector<double> p4 = {1.0}, g4 = {0.5}, none;
  step({tensor(p4, g4, none, true)}, o);
  CHECK(p4[0] == Approx(0.94).epsilon(1e-15));
}

TEST_CASE("sgd: LARS trust ratio on weight-decayed tensors only, hand-computed", "[kernels][optimizer]") {
  SgdOptions o;
  o.lr = 1.0;
  o.momentum = 0.9;
  o.weight_decay = 0.1;
  o.lars = true;
  o.lars_eta = 0.02;
  // ||w|| = 5, ||g|| = 1: trust = 0.02 * 5 / (1 + 0.1 * 5) = 1/15; g' = (g + 0.1 w) / 15 = (0.3, 1.4) / 15
  std::vector<double> w = {3.0, 4.0}, g = {0.0, 1.0}, b = {0.0, 0.0};
  std::vector<double> bn = {1.0}, bn_g = {0.5}, bn_b = {0.0};     // no weight decay: no LARS either
  std::vector<double> zero = {0.0, 0.0}, zero_g = {1.0, 1.0}, zero_b = {0.0, 0.0};  // ||w|| = 0: trust 1
  CHECK(kernels::lars_trust_ratio(tensor(w, g, b, true), o) == Approx(1.0 / 15).epsilon(1e-15));
  CHECK(kernels::lars_trust_ratio(tensor(bn, bn_g, bn_b, false), o) == 1.0);
  CHECK(kernels::lars_trust_ratio(tensor(zero, zero_g, zero_b, true), o) == 1.0);
  step({tensor(w, g, b, true), tensor(bn, bn_g, bn_b, false), tensor(zero, zero_g, zero_b, true)}, o);
  CHECK(b[0] == Approx(0.3 / 15).epsilon(1e-15));
  CHECK(b[1] == Approx(1.4 / 15).epsilon(1e-15));
  CHECK(w[0] == Approx(3.0 - 0.3 / 15).epsilon(1e-15));
  CHECK(w[1] == Approx(4.0 - 1.4 / 15).epsilon(1e-15));
  CHECK(bn[0] == Approx(0.5).epsilon(1e-15));
  CHECK(zero[0] == Approx(-1.0).epsilon(1e-15));
  // epsilon joins the denominator as in apex's LARC
  o.lars_epsilon = 0.5;
  std::vector<double> w2 = {3.0, 4.0}, g2 = {0.0, 1.0}, b2 = {0.0, 0.0};
  CHECK(kernels::lars_trust_ratio(tensor(w2, g2, b2, true), o) == Approx(0.1 / 2.0).epsilon(1e-15));
}

TEST_CASE("sgd: fp32 over many tensors matches the naive loop of torch.optim.SGD", "[kernels][optimizer]") {
  std::mt19937_64 rng(91);
  for (bool nesterov : {false, true}) {
    for (bool lars : {false, true}) {
      INFO("nesterov " << nesterov << " lars " << lars);
      SgdOptions o;
      o.lr = 0.05;
      o.momentum = 0.9;
      o.weight_decay = 5e-5;
      o.nesterov = nesterov;
      o.lars = lars;
      o.lars_eta = 0.001;
      o.lars_epsilon = 1e-8;
      const std::vector<std::int64_t> sizes = {64, 64, 3 * 3 * 64 * 64, 1000, 100003, 7};
      std::vector<std::vector<float>> params, grads, bufs;
      std::vector<std::vector<double>> ref_params, ref_bufs;
      std::vector<SgdTensor<float>> tensors;
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        params.push_back(kcheck::cast<float>(kcheck::random_vector(sizes[t], rng)));
        grads.push_back(kcheck::cast<float>(kcheck::random_vector(sizes[t], rng, -0.1, 0.1)));
        bufs.emplace_back(sizes[t], 0.0f);
        ref_params.push_back(kcheck::widen(params.back()));
        ref_bufs.emplace_back(sizes[t], 0.0);
      }
      for (std::size_t t = 0; t < sizes.size(); ++t)
        tensors.push_back({params[t].data(), grads[t].data(), bufs[t].data(), sizes[t], t % 2 == 0});
      for (int s = 0; s < 3; ++s) {
        kernels::sgd_step<float>(std::span<const SgdTensor<float>>(tensors), o);
        for (std::size_t t = 0; t < sizes.size(); ++t) {  // torch.optim.SGD (+ apex LARC), in double
          const bool decay = t % 2 == 0;
          const double wd = decay ? o.weight_decay : 0.0;
          double trust = 1.0;
          if (lars && decay) {
            double pn = 0.0, gn = 0.0;
            for (std::int64_t i = 0; i < sizes[t]; ++i) {
              pn += ref_params[t][i] * ref_params[t][i];
              gn += double(grads[t][i]) * double(grads[t][i]);
            }
            pn = std::sqrt(pn);
            gn = std::sqrt(gn);
            trust = o.lars_eta * pn / (gn + wd * pn + o.lars_epsilon);
          }
          for (std::int64_t i = 0; i < sizes[t]; ++i) {
            const double g = trust * (double(grads[t][i]) + wd * ref_params[t][i]);
            ref_bufs[t][i] = o.momentum * ref_bufs[t][i] + g;
            ref_params[t][i] -= o.lr * (nesterov ? g + o.momentum * ref_bufs[t][i] : ref_bufs[t][i]);
          }
        }
      }
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        INFO("tensor " << t);
        CHECK(kcheck::max_rel_error(params[t], ref_params[t]) < kcheck::kFloatTol);
        CHECK(kcheck::max_rel_error(bufs[t], ref_bufs[t]) < kcheck::kFloatTol);
      }
    }
  }
}

TEST_CASE("sgd: 1, 2 and 3 threads give bit-identical steps", "[kernels][optimizer]") {
  // One parallel region covers all tensors; thread shares start and end inside tensors of every size.
  std::mt19937_64 rng(92);
  const std::vector<std::int64_t> sizes = {7, 3 * 3 * 64 * 64, 64, 100003, 1000, 20011};
  std::vector<std::vector<float>> grads;
  std::vector<std::vector<float>> initial;
  for (std::int64_t size : sizes) {
    initial.push_back(kcheck::cast<float>(kcheck::random_vector(size, rng)));
    grads.push_back(kcheck::cast<float>(kcheck::random_vector(size, rng, -0.1, 0.1)));
  }
  for (bool lars : {false, true}) {
    SgdOptions o;
    o.lr = 0.05;
    o.momentum = 0.9;
    o.weight_decay = 5e-5;
    o.lars = lars;
    auto run = [&](int threads) {
      const int saved = omp_get_max_threads();
      omp_set_num_threads(threads);
      std::vector<std::vector<float>> params = initial, bufs;
      std::vector<SgdTensor<float>> tensors;
      for (std::size_t t = 0; t < sizes.size(); ++t) bufs.emplace_back(sizes[t], 0.0f);
      for (std::size_t t = 0; t < sizes.size(); ++t)
        tensors.push_back({params[t].data(), grads[t].data(), bufs[t].data(), sizes[t], t % 2 == 1});
      for (int s = 0; s < 2; ++s) kernels::sgd_step<float>(std::span<const SgdTensor<float>>(tensors), o);
      omp_set_num_threads(saved);
      std::vector<float> all;
      for (std::size_t t = 0; t < sizes.size(); ++t) {
        all.insert(all.end(), params[t].begin(), params[t].end());
        all.insert(all.end(), bufs[t].begin(), bufs[t].end());
      }
      return all;
    };
    INFO("lars " << lars);
    const std::vector<float> one = run(1);
    CHECK(kcheck::bit_identical(one, run(2)));
    CHECK(kcheck::bit_identical(one, run(3)));
  }
}
