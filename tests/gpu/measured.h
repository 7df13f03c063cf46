// Measured values in the GPU tests. GPU time is scarce and several bounds
// were set by reasoning before any GPU run, so every check of a measured
// quantity prints one line on stdout, pass or fail:
//   measured: LayerGpu.DenseMatchesCpu [f16 bias=1 input_grad=1] dense y max rel err = 0.00121 (bound <= 0.005) ok
// and one run yields the numbers a bound can be set from. bench/gpu_check.sh
// collects these lines into measured.txt. Use
//   EXPECT_TRUE(measured("dense y max rel err", worst, at_most(1e-4))) << details;
// (the failure message repeats the line), and MEASURED_SCOPE(text) where a
// loop would use SCOPED_TRACE(text): it is that trace, and it also names the
// case in the lines printed inside it, which a trace does only on failure.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

namespace dlscale::testing {

// Six significant digits: enough to set a bound from, short enough to read.
inline std::string measured_number(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.6g", v);
  return text;
}

// What a bound allows (NaN never passes: every comparison with it is false),
// and how it reads in the line.
struct Bound {
  std::function<bool(double)> holds;
  std::string text;
};

inline Bound at_most(double b) { return {[b](double v) { return v <= b; }, "<= " + measured_number(b)}; }
inline Bound below(double b) { return {[b](double v) { return v < b; }, "< " + measured_number(b)}; }
inline Bound at_least(double b) { return {[b](double v) { return v >= b; }, ">= " + measured_number(b)}; }
inline Bound above(double b) { return {[b](double v) { return v > b; }, "> " + measured_number(b)}; }
inline Bound equal_to(double r) { return {[r](double v) { return v == r; }, "== " + measured_number(r)}; }
// |v - reference| <= tolerance, as EXPECT_NEAR.
inline Bound near(double reference, double tolerance) {
  return {[=](double v) { return std::abs(v - reference) <= tolerance; },
          measured_number(reference) + " +- " + measured_number(tolerance)};
}
// Both bounds at once: both(at_least(10), below(40)).
inline Bound both(Bound a, Bound b) {
  return {[a, b](double v) { return a.holds(v) && b.holds(v); }, a.text + " and " + b.text};
}
// floor < v <= bound: an error that must exist (rounding of a lower
// precision) but stay small.
inline Bound between(double floor, double bound) { return both(above(floor), at_most(bound)); }

// The cases (MEASURED_SCOPE) the current line is inside, outermost first.
inline std::vector<std::string>& measured_contexts() {
  static std::vector<std::string> contexts;
  return contexts;
}

// "Suite.Test [case; inner case] ": where a line comes from.
inline std::string measured_origin() {
  std::string origin;
  if (const auto* info = ::testing::UnitTest::GetInstance()->current_test_info())
    origin = std::string(info->test_suite_name()) + "." + info->name() + " ";
  if (!measured_contexts().empty()) {
    origin += "[";
    for (std::size_t i = 0; i < measured_contexts().size(); ++i)
      origin += (i ? "; " : "") + measured_contexts()[i];
    origin += "] ";
  }
  return origin;
}

// Prints "measured: <origin><what> = <value> (bound <bound>) ok|FAILED" and
// returns whether the value is within the bound, with that line as the message.
inline ::testing::AssertionResult measured(const std::string& what, double value, const Bound& bound) {
  const std::string line = "measured: " + measured_origin() + what + " = " + measured_number(value) +
                           " (bound " + bound.text + ")";
  const bool ok = bound.holds(value);
  std::printf("%s %s\n", line.c_str(), ok ? "ok" : "FAILED");
  std::fflush(stdout);  // the line survives a crash later in the test
  return ok ? ::testing::AssertionSuccess() << line : ::testing::AssertionFailure() << line;
}

// A measured value no check bounds by itself (one tensor's part of a total
// that is checked): "measured: <origin><what> = <value> (no bound)".
inline void measured_info(const std::string& what, double value) {
  std::printf("measured: %s%s = %s (no bound)\n", measured_origin().c_str(), what.c_str(),
              measured_number(value).c_str());
  std::fflush(stdout);
}

// SCOPED_TRACE that also names the case in the measured lines inside it.
class MeasuredScope {
 public:
  MeasuredScope(const char* file, int line, const std::string& text) : trace_(file, line, text) {
    measured_contexts().push_back(text);
  }
  ~MeasuredScope() { measured_contexts().pop_back(); }
  MeasuredScope(const MeasuredScope&) = delete;
  MeasuredScope& operator=(const MeasuredScope&) = delete;

 private:
  ::testing::ScopedTrace trace_;
};

}  // namespace dlscale::testing

#define DLSCALE_MEASURED_CONCAT_(a, b) a##b
#define DLSCALE_MEASURED_CONCAT(a, b) DLSCALE_MEASURED_CONCAT_(a, b)
#define MEASURED_SCOPE(text)                                                                     \
  const ::dlscale::testing::MeasuredScope DLSCALE_MEASURED_CONCAT(measured_scope_, __LINE__)( \
      __FILE__, __LINE__, (text))
