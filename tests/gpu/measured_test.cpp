// measured.h, the line every GPU test check prints (runs everywhere: the GPU
// tests themselves are skipped without a GPU, and bench/gpu_check.sh reads
// these lines from the one run a lent machine gives).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "gpu/measured.h"

namespace dlscale::testing {
namespace {

// What `fn` prints on stdout.
template <class Fn>
std::string printed(Fn&& fn) {
  ::testing::internal::CaptureStdout();
  fn();
  return ::testing::internal::GetCapturedStdout();
}

TEST(Measured, PrintsValueBoundAndVerdictOnPassAndFailure) {
  ::testing::AssertionResult pass = ::testing::AssertionFailure();
  std::string out = printed([&] { pass = measured("conv2d dx max rel err", 3.1e-6, at_most(1e-4)); });
  EXPECT_TRUE(pass);
  EXPECT_EQ(out, "measured: Measured.PrintsValueBoundAndVerdictOnPassAndFailure conv2d dx max rel err = 3.1e-06 "
                 "(bound <= 0.0001) ok\n");

  ::testing::AssertionResult fail = ::testing::AssertionSuccess();
  out = printed([&] { fail = measured("skipped steps", 41, both(at_least(10), below(40))); });
  EXPECT_FALSE(fail);
  EXPECT_NE(out.find("skipped steps = 41 (bound >= 10 and < 40) FAILED\n"), std::string::npos) << out;
  // The failure message is the line, so a failing EXPECT_TRUE shows the figures.
  EXPECT_NE(std::string(fail.message()).find("skipped steps = 41 (bound >= 10 and < 40)"), std::string::npos)
      << fail.message();
}

TEST(Measured, BoundsHoldWhereTheirTextSays) {
  EXPECT_TRUE(at_most(1).holds(1));
  EXPECT_FALSE(below(1).holds(1));
  EXPECT_TRUE(at_least(1).holds(1));
  EXPECT_FALSE(above(1).holds(1));
  EXPECT_TRUE(equal_to(-INFINITY).holds(-INFINITY));
  EXPECT_TRUE(near(0.9, 0.05).holds(0.86));
  EXPECT_FALSE(near(0.9, 0.05).holds(0.84));
  EXPECT_EQ(near(0.9, 0.05).text, "0.9 +- 0.05");
  // A 2-byte math error must be above its floor and within its bound.
  EXPECT_FALSE(between(1e-5, 5e-3).holds(1e-5));
  EXPECT_TRUE(between(1e-5, 5e-3).holds(5e-3));
  EXPECT_FALSE(between(1e-5, 5e-3).holds(6e-3));
  EXPECT_EQ(between(1e-5, 5e-3).text, "> 1e-05 and <= 0.005");
  // NaN, an error that a kernel's bug produces, passes no bound.
  for (const Bound& b : {at_most(1), below(1), at_least(1), above(1), equal_to(0), near(0, 1), between(0, 1)})
    EXPECT_FALSE(b.holds(NAN)) << b.text;
}

TEST(Measured, NamesTheCasesOfTheScopesItIsIn) {
  std::string out = printed([] {
    MEASURED_SCOPE("f16 bias=1");
    {
      MEASURED_SCOPE("conv2d filters=5");
      EXPECT_TRUE(measured("y max rel err", 1e-3, at_most(5e-3)));
    }
    measured_info("loss", 0.25);
  });
  EXPECT_NE(out.find("measured: Measured.NamesTheCasesOfTheScopesItIsIn [f16 bias=1; conv2d filters=5] "
                     "y max rel err = 0.001 (bound <= 0.005) ok\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("measured: Measured.NamesTheCasesOfTheScopesItIsIn [f16 bias=1] loss = 0.25 (no bound)\n"),
            std::string::npos)
      << out;
  out = printed([] { measured_info("after", 1); });
  EXPECT_EQ(out, "measured: Measured.NamesTheCasesOfTheScopesItIsIn after = 1 (no bound)\n")
      << "a scope's case ends with it";
}

}  // namespace
}  // namespace dlscale::testing
