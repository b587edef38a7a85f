// Matrix product wrapper (kernels/cpu/gemm.cpp).
#include "kernels/ops.h"
#include "tests/unit/kernels_check.h"

#include <catch2/catch.hpp>

namespace kernels = train::kernels;

namespace {

// C = alpha * op(A) * op(B) + beta * C, row-major, by the definition.
std::vector<double> naive(bool ta, bool tb, int m, int n, int k, double alpha, const std::vector<double>& a, int lda,
                          const std::vector<double>& b, int ldb, double beta, const std::vector<double>& c, int ldc) {
  std::vector<double> out = c;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int p = 0; p < k; ++p)
        acc += (ta ? a[std::size_t(p) * lda + i] : a[std::size_t(i) * lda + p]) *
               (tb ? b[std::size_t(j) * ldb + p] : b[std::size_t(p) * ldb + j]);
      out[std::size_t(i) * ldc + j] = alpha * acc + (beta == 0.0 ? 0.0 : beta * c[std::size_t(i) * ldc + j]);
    }
  return out;
}

template <typename T>
void check_gemm(std::mt19937_64& rng, bool ta, bool tb, int m, int n, int k, double alpha, double beta, double tol) {
  INFO("trans " << ta << tb << " m " << m << " n " << n << " k " << k << " alpha " << alpha << " beta " << beta);
  const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 1, ldc = n + 2;  // padded rows
  const auto a = kcheck::cast<T>(kcheck::random_vector(std::size_t(ta ? k : m) * lda, rng));
  const auto b = kcheck::cast<T>(kcheck::random_vector(std::size_t(tb ? n : k) * ldb, rng));
  auto c = kcheck::cast<T>(kcheck::random_vector(std::size_t(m) * ldc, rng));
  if (beta == 0.0) c = kcheck::nan_vector<T>(c.size());  // beta 0 must not read C
  auto ref = naive(ta, tb, m, n, k, alpha, kcheck::widen(a), lda, kcheck::widen(b), ldb, beta, kcheck::widen(c), ldc);
  kernels::gemm<T>(ta, tb, m, n, k, T(alpha), a.data(), lda, b.data(), ldb, T(beta), c.data(), ldc);
  // Padding columns of C are untouched (compare only the m x n block, padding separately).
  std::vector<T> block;
  std::vector<double> ref_block;
  bool padding_untouched = true;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < ldc; ++j) {
      if (j < n) {
        block.push_back(c[std::size_t(i) * ldc + j]);
        ref_block.push_back(ref[std::size_t(i) * ldc + j]);
      } else if (beta != 0.0) {
        padding_untouched = padding_untouched && double(c[std::size_t(i) * ldc + j]) == ref[std::size_t(i) * ldc + j];
      }
    }
  CHECK(padding_untouched);
  CHECK(kcheck::max_rel_error(block, ref_block) < tol);
}

}  // namespace

TEST_CASE("gemm: every transpose combination against the naive loops", "[kernels][gemm]") {
  std::mt19937_64 rng(101);
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      // Small (one thread), tall (split over rows), wide (split over columns), odd sizes.
      check_gemm<double>(rng, ta, tb, 5, 7, 3, 1.0, 0.0, 1e-14);
      check_gemm<double>(rng, ta, tb, 301, 37, 129, 0.5, 1.5, 1e-14);
      check_gemm<float>(rng, ta, tb, 5, 7, 3, 1.0, 0.0, kcheck::kFloatTol);
      check_gemm<float>(rng, ta, tb, 517, 64, 97, 1.0, 0.0, kcheck::kFloatTol);
      check_gemm<float>(rng, ta, tb, 33, 515, 200, -2.0, 1.0, kcheck::kFloatTol);
    }
}

TEST_CASE("gemm: k = 0 scales C by beta", "[kernels][gemm]") {
  std::vector<float> c = {1.0f, 2.0f, 3.0f, 4.0f};
  kernels::gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
  CHECK(c == std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f});
  auto nan = kcheck::nan_vector<float>(4);
  kernels::gemm<float>(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, nan.data(), 2);
  CHECK(nan == std::vector<float>(4, 0.0f));
}
