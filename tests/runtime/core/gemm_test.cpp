// gemm: float64 (OpenBLAS, split over OpenMP's threads) against a plain
// triple loop for every transpose combination, bands by rows and by columns,
// and the same bits whatever the thread count (1 to 64), for shapes with
// prime extents, extents of 1 and extents smaller than the thread count.
// test_gemm_skylakex runs the same under OPENBLAS_CORETYPE=SkylakeX, whose
// kernels round differently for different call shapes.
#include "runtime/core/blas.h"

#include <gtest/gtest.h>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "runtime/core/rng.h"

namespace dlscale {
namespace {

struct Case {
  bool ta, tb;
  std::int64_t m, n, k;
};

std::vector<double> random_values(std::int64_t count, Rng& rng) {
  std::vector<double> v(static_cast<std::size_t>(count));
  for (auto& x : v) x = rng.normal();
  return v;
}

std::vector<double> run(const Case& g, const std::vector<double>& a, const std::vector<double>& b,
                        const std::vector<double>& c0, int threads) {
  const int before = cpu_threads();
  set_cpu_threads(threads);
  std::vector<double> c = c0;
  gemm<double>(g.ta, g.tb, g.m, g.n, g.k, 0.5, a.data(), b.data(), 2.0, c.data());
  set_cpu_threads(before);
  return c;
}

TEST(Gemm, Float64MatchesReferenceAndIgnoresThreadCount) {
  // Tall (bands of rows) and wide (bands of columns), sizes not multiples of 8.
  for (const auto& [m, n, k] : {std::array<std::int64_t, 3>{203, 61, 37}, {45, 190, 53}}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Case g{ta, tb, m, n, k};
        SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb);
        Rng rng(5);
        const auto a = random_values(m * k, rng), b = random_values(k * n, rng), c0 = random_values(m * n, rng);
        const auto one = run(g, a, b, c0, 1);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::int64_t p = 0; p < k; ++p)
              s += (ta ? a[p * m + i] : a[i * k + p]) * (tb ? b[j * k + p] : b[p * n + j]);
            const double want = 0.5 * s + 2.0 * c0[i * n + j];
            ASSERT_NEAR(one[i * n + j], want, 1e-12 * (1 + std::fabs(want))) << i << "," << j;
          }
        for (int threads : {2, 3}) {
          const auto many = run(g, a, b, c0, threads);
          EXPECT_EQ(std::memcmp(one.data(), many.data(), one.size() * sizeof(double)), 0)
              << threads << " threads differ from 1";
        }
      }
  }
}

// C pre-filled with NaN and beta 0: an element no band computes stays NaN.
std::vector<double> run_overwriting(const Case& g, const std::vector<double>& a, const std::vector<double>& b,
                                    int threads) {
  const int before = cpu_threads();
  set_cpu_threads(threads);
  std::vector<double> c(static_cast<std::size_t>(g.m * g.n), std::numeric_limits<double>::quiet_NaN());
  gemm<double>(g.ta, g.tb, g.m, g.n, g.k, 1.0, a.data(), b.data(), 0.0, c.data());
  set_cpu_threads(before);
  return c;
}

double reference_element(const Case& g, const std::vector<double>& a, const std::vector<double>& b, std::int64_t i,
                         std::int64_t j) {
  double s = 0;
  for (std::int64_t p = 0; p < g.k; ++p)
    s += (g.ta ? a[p * g.m + i] : a[i * g.k + p]) * (g.tb ? b[j * g.k + p] : b[p * g.n + j]);
  return s;
}

// The shapes a review found broken (17x17x1000 on 2 threads, 100x64x784 on
// 12, a dense layer's 8x10x4096 on 16) and others: prime extents, an extent
// of 1, extents below the thread count, both band directions. Every one is
// large enough (m·n·k >= 2^18) to be split into bands.
const std::array<std::array<std::int64_t, 3>, 8> kSplitShapes{{{17, 17, 1000},
                                                               {100, 64, 784},
                                                               {8, 10, 4096},
                                                               {1, 997, 293},
                                                               {641, 1, 409},
                                                               {3, 5, 17483},
                                                               {263, 257, 7},
                                                               {61, 521, 11}}};

TEST(Gemm, Float64EveryElementWrittenAndSameBitsAtEveryThreadCount) {
  for (const auto& [m, n, k] : kSplitShapes)
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const Case g{ta, tb, m, n, k};
        SCOPED_TRACE(testing::Message() << m << "x" << n << "x" << k << " ta=" << ta << " tb=" << tb);
        Rng rng(11);
        const auto a = random_values(m * k, rng), b = random_values(k * n, rng);
        const auto one = run_overwriting(g, a, b, 1);
        for (std::int64_t i = 0; i < m; ++i)
          for (std::int64_t j = 0; j < n; ++j) {
            const double want = reference_element(g, a, b, i, j);
            ASSERT_NEAR(one[i * n + j], want, 1e-11 * (1 + std::fabs(want))) << i << "," << j << " at 1 thread";
          }
        for (int threads = 2; threads <= 64; ++threads) {
          const auto many = run_overwriting(g, a, b, threads);
          std::int64_t unwritten = 0, differ = 0;
          for (std::size_t e = 0; e < many.size(); ++e) {
            unwritten += std::isnan(many[e]);
            differ += std::memcmp(&many[e], &one[e], sizeof(double)) != 0;
          }
          ASSERT_EQ(unwritten, 0) << threads << " threads left elements unwritten";
          ASSERT_EQ(differ, 0) << threads << " threads differ from 1 in " << differ << " of " << many.size();
        }
      }
}

// Run by test_gemm_skylakex with OPENBLAS_CORETYPE=SkylakeX: the core type
// must really be the one asked for, or the test above proved nothing about it.
TEST(Gemm, RunsOnTheRequestedOpenBlasCore) {
  const char* wanted = std::getenv("OPENBLAS_CORETYPE");
  if (!wanted) GTEST_SKIP() << "OPENBLAS_CORETYPE not set: OpenBLAS chose " << openblas_core();
  if (std::string(wanted) == "SkylakeX" && !__builtin_cpu_supports("avx512f"))
    GTEST_SKIP() << "this CPU has no AVX-512, so OpenBLAS cannot run its SkylakeX kernels here";
  std::string got = openblas_core();
  for (auto& ch : got) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::string want = wanted;
  for (auto& ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  EXPECT_EQ(got, want) << "OPENBLAS_CORETYPE=" << wanted << " but OpenBLAS runs " << openblas_core();
}

}  // namespace
}  // namespace dlscale
