// gemm: float64 (OpenBLAS, split over OpenMP's threads) against a plain
// triple loop for every transpose combination, bands by rows and by columns,
// and the same bits whatever the thread count.
#include "runtime/core/blas.h"

#include <gtest/gtest.h>

#include <cmath>
#include <array>
#include <cstring>
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

}  // namespace
}  // namespace dlscale
