// Convolution (kernels/cpu/conv2d.cpp): forward, gradient to input, gradient to weights.
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <omp.h>

#include <chrono>
#include <cstdio>

using train::kernels::Conv2dShape;
namespace kernels = train::kernels;

namespace {

struct WorkspaceLimit {  // sets the conv2d workspace limit for one scope
  std::size_t saved = kernels::conv2d_workspace_limit();
  explicit WorkspaceLimit(std::size_t bytes) { kernels::set_conv2d_workspace_limit(bytes); }
  ~WorkspaceLimit() { kernels::set_conv2d_workspace_limit(saved); }
};

std::string describe(const Conv2dShape& s) {
  return fmt::format("n={} {}x{}x{} -> {} kernel {}x{} stride {},{} pad {},{}", s.n, s.h, s.w, s.in_c, s.out_c,
                     s.kernel_h, s.kernel_w, s.stride_h, s.stride_w, s.pad_h, s.pad_w);
}

// The naive loops: the definition of the op.
std::vector<double> naive_forward(const Conv2dShape& s, const std::vector<double>& x, const std::vector<double>& w) {
  const int ho = s.out_h(), wo = s.out_w();
  std::vector<double> y(s.y_size(), 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int oh = 0; oh < ho; ++oh)
      for (int ow = 0; ow < wo; ++ow)
        for (int o = 0; o < s.out_c; ++o) {
          double acc = 0.0;
          for (int kh = 0; kh < s.kernel_h; ++kh)
            for (int kw = 0; kw < s.kernel_w; ++kw) {
              const int ih = oh * s.stride_h - s.pad_h + kh, iw = ow * s.stride_w - s.pad_w + kw;
              if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
              for (int c = 0; c < s.in_c; ++c)
                acc += x[((std::size_t(n) * s.h + ih) * s.w + iw) * s.in_c + c] *
                       w[((std::size_t(o) * s.kernel_h + kh) * s.kernel_w + kw) * s.in_c + c];
            }
          y[((std::size_t(n) * ho + oh) * wo + ow) * s.out_c + o] = acc;
        }
  return y;
}

// dx and dw of L = sum(y * dy), by the same loops.
void naive_backward(const Conv2dShape& s, const std::vector<double>& x, const std::vector<double>& w,
                    const std::vector<double>& dy, std::vector<double>& dx, std::vector<double>& dw) {
  const int ho = s.out_h(), wo = s.out_w();
  dx.assign(s.x_size(), 0.0);
  dw.assign(s.w_size(), 0.0);
  for (int n = 0; n < s.n; ++n)
    for (int oh = 0; oh < ho; ++oh)
      for (int ow = 0; ow < wo; ++ow)
        for (int o = 0; o < s.out_c; ++o) {
          const double g = dy[((std::size_t(n) * ho + oh) * wo + ow) * s.out_c + o];
          for (int kh = 0; kh < s.kernel_h; ++kh)
            for (int kw = 0; kw < s.kernel_w; ++kw) {
              const int ih = oh * s.stride_h - s.pad_h + kh, iw = ow * s.stride_w - s.pad_w + kw;
              if (ih < 0 || ih >= s.h || iw < 0 || iw >= s.w) continue;
              for (int c = 0; c < s.in_c; ++c) {
                const std::size_t xi = ((std::size_t(n) * s.h + ih) * s.w + iw) * s.in_c + c;
                const std::size_t wi = ((std::size_t(o) * s.kernel_h + kh) * s.kernel_w + kw) * s.in_c + c;
                dx[xi] += g * w[wi];
                dw[wi] += g * x[xi];
              }
            }
        }
}

Conv2dShape shape(int n, int h, int w, int c, int o, int kh, int kw, int sh, int sw, int ph, int pw) {
  return Conv2dShape{n, h, w, c, o, kh, kw, sh, sw, ph, pw};
}

// Small shapes for the fp64 finite-difference check: 1x1, 3x3, 7x7, stride 2, padding, odd and
// rectangular sizes, a rectangular kernel.
const std::vector<Conv2dShape> small_shapes = {
    Conv2dShape::square(2, 5, 5, 4, 3, 1, 1, 0),  // pointwise: the GEMM-only path
    Conv2dShape::square(2, 7, 7, 3, 4, 1, 2, 0),  // downsample projection
    Conv2dShape::square(2, 7, 6, 3, 4, 3, 1, 1),
    Conv2dShape::square(2, 7, 9, 2, 3, 3, 2, 1),  // ResNet v1.5's strided 3x3
    Conv2dShape::square(2, 9, 8, 3, 5, 7, 2, 3),  // the stem
    Conv2dShape::square(1, 6, 5, 2, 3, 3, 1, 0),  // no padding
    shape(2, 7, 5, 2, 3, 3, 1, 2, 1, 0, 1),       // rectangular kernel, mixed stride and padding
    Conv2dShape::square(2, 6, 6, 2, 3, 3, 3, 2),  // stride 3, padding 2
};

// Mid-size shapes for fp32 against the naive loops (channel counts where the GEMM does real blocking).
const std::vector<Conv2dShape> float_shapes = {
    Conv2dShape::square(2, 14, 14, 32, 48, 3, 1, 1), Conv2dShape::square(2, 15, 15, 16, 32, 3, 2, 1),
    Conv2dShape::square(2, 32, 30, 3, 16, 7, 2, 3),  Conv2dShape::square(3, 9, 9, 64, 40, 1, 1, 0),
    Conv2dShape::square(2, 9, 11, 24, 64, 1, 2, 0),  Conv2dShape::square(2, 8, 8, 128, 17, 3, 1, 1),
};

}  // namespace

TEST_CASE("conv2d: fp64 gradients match central finite differences", "[kernels][conv2d]") {
  std::mt19937_64 rng(11);
  // One block for everything; blocks of a few rows that start mid-image and span images; one row per block.
  for (std::size_t limit : {std::size_t{8} << 20, std::size_t{2} << 10, std::size_t{1}}) {
    WorkspaceLimit scope(limit);
    for (const Conv2dShape& s : small_shapes) {
      INFO(describe(s) << ", workspace limit " << limit);
      std::vector<double> x = kcheck::random_vector(s.x_size(), rng);
      std::vector<double> w = kcheck::random_vector(s.w_size(), rng);
      const std::vector<double> r = kcheck::random_vector(s.y_size(), rng);
      auto loss = [&] {
        std::vector<double> y(s.y_size());
        kernels::conv2d_forward<double>(s, x.data(), w.data(), y.data());
        return kcheck::dot(y, r);
      };
      std::vector<double> dx = kcheck::nan_vector<double>(s.x_size()), dw = kcheck::nan_vector<double>(s.w_size());
      kernels::conv2d_backward_input<double>(s, r.data(), w.data(), dx.data());
      kernels::conv2d_backward_weight<double>(s, x.data(), r.data(), dw.data());
      CHECK(kcheck::finite_difference_error(x, dx, loss) < kcheck::kFiniteDifferenceTol);
      CHECK(kcheck::finite_difference_error(w, dw, loss) < kcheck::kFiniteDifferenceTol);
    }
  }
}

TEST_CASE("conv2d: fp32 matches the naive loops", "[kernels][conv2d]") {
  std::mt19937_64 rng(12);
  for (std::size_t limit : {std::size_t{8} << 20, std::size_t{64} << 10, std::size_t{1}}) {
    WorkspaceLimit scope(limit);
    for (const Conv2dShape& s : float_shapes) {
      INFO(describe(s) << ", workspace limit " << limit);
      const std::vector<double> x = kcheck::random_vector(s.x_size(), rng);
      const std::vector<double> w = kcheck::random_vector(s.w_size(), rng);
      const std::vector<double> dy = kcheck::random_vector(s.y_size(), rng);
      const auto xf = kcheck::cast<float>(x), wf = kcheck::cast<float>(w), dyf = kcheck::cast<float>(dy);
      // The reference sees exactly the fp32 inputs.
      const auto xr = kcheck::widen(xf), wr = kcheck::widen(wf), dyr = kcheck::widen(dyf);
      auto y = kcheck::nan_vector<float>(s.y_size());
      auto dx = kcheck::nan_vector<float>(s.x_size());
      auto dw = kcheck::nan_vector<float>(s.w_size());
      kernels::conv2d_forward<float>(s, xf.data(), wf.data(), y.data());
      kernels::conv2d_backward_input<float>(s, dyf.data(), wf.data(), dx.data());
      kernels::conv2d_backward_weight<float>(s, xf.data(), dyf.data(), dw.data());
      std::vector<double> ref_dx, ref_dw;
      naive_backward(s, xr, wr, dyr, ref_dx, ref_dw);
      CHECK(kcheck::max_rel_error(y, naive_forward(s, xr, wr)) < kcheck::kFloatTol);
      CHECK(kcheck::max_rel_error(dx, ref_dx) < kcheck::kFloatTol);
      CHECK(kcheck::max_rel_error(dw, ref_dw) < kcheck::kFloatTol);
    }
  }
}

TEST_CASE("conv2d: repeated calls are bit-identical", "[kernels][conv2d]") {
  std::mt19937_64 rng(13);
  const Conv2dShape s = Conv2dShape::square(4, 12, 12, 32, 64, 3, 1, 1);
  const auto x = kcheck::cast<float>(kcheck::random_vector(s.x_size(), rng));
  const auto w = kcheck::cast<float>(kcheck::random_vector(s.w_size(), rng));
  const auto dy = kcheck::cast<float>(kcheck::random_vector(s.y_size(), rng));
  auto run = [&] {
    std::vector<float> y(s.y_size()), dx(s.x_size()), dw(s.w_size());
    kernels::conv2d_forward<float>(s, x.data(), w.data(), y.data());
    kernels::conv2d_backward_input<float>(s, dy.data(), w.data(), dx.data());
    kernels::conv2d_backward_weight<float>(s, x.data(), dy.data(), dw.data());
    y.insert(y.end(), dx.begin(), dx.end());
    y.insert(y.end(), dw.begin(), dw.end());
    return y;
  };
  const auto first = run();
  CHECK(kcheck::bit_identical(first, run()));
  CHECK(kcheck::bit_identical(first, run()));
}

TEST_CASE("conv2d: 1, 2 and 3 threads agree with the naive loops", "[kernels][conv2d]") {
  // Three threads split rows mid-image and columns of dw unevenly: every share boundary is exercised.
  std::mt19937_64 rng(15);
  const int saved = omp_get_max_threads();
  // Shapes large enough to run on the whole team (small work runs on the calling thread alone).
  for (const Conv2dShape& s : {Conv2dShape::square(3, 21, 19, 24, 20, 3, 2, 1),
                               Conv2dShape::square(2, 14, 14, 16, 32, 3, 1, 1),
                               Conv2dShape::square(2, 24, 24, 3, 8, 7, 2, 3)}) {
    const auto x = kcheck::cast<float>(kcheck::random_vector(s.x_size(), rng));
    const auto w = kcheck::cast<float>(kcheck::random_vector(s.w_size(), rng));
    const auto dy = kcheck::cast<float>(kcheck::random_vector(s.y_size(), rng));
    std::vector<double> ref_dx, ref_dw;
    naive_backward(s, kcheck::widen(x), kcheck::widen(w), kcheck::widen(dy), ref_dx, ref_dw);
    const std::vector<double> ref_y = naive_forward(s, kcheck::widen(x), kcheck::widen(w));
    for (auto [threads, limit] : {std::pair<int, std::size_t>{1, std::size_t{8} << 20}, {2, std::size_t{8} << 20},
                                  {3, std::size_t{8} << 20}, {2, std::size_t{64} << 10}, {3, std::size_t{64} << 10}}) {
      INFO(describe(s) << ", " << threads << " threads, workspace limit " << limit);
      WorkspaceLimit scope(limit);  // the whole batch in one block, or blocks that split each thread's share
      omp_set_num_threads(threads);
      auto y = kcheck::nan_vector<float>(s.y_size()), dx = kcheck::nan_vector<float>(s.x_size());
      auto dw = kcheck::nan_vector<float>(s.w_size());
      kernels::conv2d_forward<float>(s, x.data(), w.data(), y.data());
      kernels::conv2d_backward_input<float>(s, dy.data(), w.data(), dx.data());
      kernels::conv2d_backward_weight<float>(s, x.data(), dy.data(), dw.data());
      CHECK(kcheck::max_rel_error(y, ref_y) < kcheck::kFloatTol);
      CHECK(kcheck::max_rel_error(dx, ref_dx) < kcheck::kFloatTol);
      CHECK(kcheck::max_rel_error(dw, ref_dw) < kcheck::kFloatTol);
    }
  }
  omp_set_num_threads(saved);
}

TEST_CASE("conv2d: bad shapes are refused", "[kernels][conv2d]") {
  std::vector<float> buffer(1024);
  CHECK_THROWS_AS(kernels::conv2d_forward<float>(Conv2dShape::square(1, 2, 2, 1, 1, 5, 1, 1), buffer.data(),
                                                 buffer.data(), buffer.data()),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::conv2d_forward<float>(Conv2dShape::square(1, 4, 4, 1, 1, 3, 0, 1), buffer.data(),
                                                 buffer.data(), buffer.data()),
                  std::invalid_argument);
}

// Not part of the suite (hidden tag); run with: unit_tests "[kernels-bench]"
TEST_CASE("conv2d: speed of ResNet-50 layers (prints GFLOP/s)", "[.][kernels-bench]") {
  std::mt19937_64 rng(14);
  const std::vector<std::pair<const char*, Conv2dShape>> layers = {
      {"layer1 3x3 64->64, 56x56", Conv2dShape::square(8, 56, 56, 64, 64, 3, 1, 1)},
      {"layer1 1x1 64->256, 56x56", Conv2dShape::square(8, 56, 56, 64, 256, 1, 1, 0)},
      {"layer3 3x3 256->256, 14x14", Conv2dShape::square(8, 14, 14, 256, 256, 3, 1, 1)},
      {"stem 7x7/2 3->64, 224x224", Conv2dShape::square(8, 224, 224, 3, 64, 7, 2, 3)},
  };
  for (const auto& [name, s] : layers) {
    const auto x = kcheck::cast<float>(kcheck::random_vector(s.x_size(), rng));
    const auto w = kcheck::cast<float>(kcheck::random_vector(s.w_size(), rng));
    const auto dy = kcheck::cast<float>(kcheck::random_vector(s.y_size(), rng));
    std::vector<float> y(s.y_size()), dx(s.x_size()), dw(s.w_size());
    auto time = [&](auto&& f) {
      f();  // warm-up (scratch allocation, BLAS buffers)
      double best = 1e30;
      for (int i = 0; i < 3; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        f();
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return s.flops() / best * 1e-9;
    };
    const double fwd = time([&] { kernels::conv2d_forward<float>(s, x.data(), w.data(), y.data()); });
    const double bin = time([&] { kernels::conv2d_backward_input<float>(s, dy.data(), w.data(), dx.data()); });
    const double bwt = time([&] { kernels::conv2d_backward_weight<float>(s, x.data(), dy.data(), dw.data()); });
    std::printf("conv2d %-28s N=%d  %.2f GFLOP per pass  forward %6.1f  grad-input %6.1f  grad-weight %6.1f GFLOP/s\n",
                name, s.n, s.flops() * 1e-9, fwd, bin, bwt);
  }
}
