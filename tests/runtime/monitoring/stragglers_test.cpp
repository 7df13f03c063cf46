// Straggler detection on made-up windows of per-rank figures: a persistently
// slow rank is named after the set number of windows and not before, noise
// (one slow window, spread below the thresholds, a slower rank whose excess
// is a small part of a communication-bound step, equal slowness on every
// rank) names nobody, a node whose ranks are all slow is named as a node, a
// recovered rank is said so and kept in the report with the figures of the
// windows it straggled in, and the thresholds come from the environment.
#include <gtest/gtest.h>

#include <cstdlib>

#include "expect_error.h"
#include "runtime/monitoring/stragglers.h"

namespace dlscale::testing {
namespace {

// Four ranks, two per host; compute times in ms, step time: the slowest
// compute and 1 ms of all-reduce, unless given.
std::vector<RankWindow> window(std::vector<double> compute_ms,
                               std::vector<std::string> hosts = {"n1", "n1", "n2", "n2"}, double step_ms = 0) {
  double slowest = 0;
  for (double c : compute_ms) slowest = std::max(slowest, c);
  if (step_ms == 0) step_ms = slowest + 1;
  std::vector<RankWindow> w;
  for (std::size_t r = 0; r < compute_ms.size(); ++r)
    w.push_back({static_cast<int>(r), hosts[r], step_ms / 1000, compute_ms[r] / 1000});
  return w;
}

TEST(Stragglers, ASlowRankIsNamedAfterThreeWindowsWithWhatTheJobWaits) {
  StragglerDetector d;
  EXPECT_TRUE(d.observe(window({20, 21, 30, 20}), 50, 1).empty());
  EXPECT_TRUE(d.observe(window({20, 20, 30, 21}), 50, 2).empty());
  EXPECT_TRUE(d.current().empty()) << "named before the third slow window";
  const auto lines = d.observe(window({21, 20, 30, 20}), 50, 3);
  ASSERT_EQ(lines.size(), 1u);
  // The median of the others is 20 ms: 50% longer, 10 ms of each 31 ms step.
  EXPECT_EQ(lines[0],
            "dlscale: straggler: rank 2 (n2) computes 50% longer than the median rank; the job waits 10.0 ms of each "
            "31.0 ms step for it");
  ASSERT_EQ(d.current().size(), 1u);
  EXPECT_EQ(d.current()[0].rank, 2);
  EXPECT_FALSE(d.current()[0].whole_node) << "rank 3 on the same host is not slow";
  EXPECT_TRUE(d.observe(window({20, 20, 34, 20}), 50, 4).empty()) << "said once, not every window";
  const auto reports = d.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].rank, 2);
  EXPECT_EQ(reports[0].host, "n2");
  EXPECT_EQ(reports[0].steps, 100);
  EXPECT_DOUBLE_EQ(reports[0].first_time_s, 3);
  EXPECT_NEAR(reports[0].mean_excess_s, 0.012, 1e-9);  // (10 + 14) / 2 ms
  EXPECT_NEAR(reports[0].share_of_step, (0.010 + 0.014) / (0.031 + 0.035), 1e-9);
  EXPECT_FALSE(reports[0].recovered);
}

TEST(Stragglers, NoiseNamesNobody) {
  StragglerDetector d;
  // One rank slow in one window out of every three, a different one each time.
  for (int i = 0; i < 12; ++i) {
    std::vector<double> c = {20, 20, 20, 20};
    if (i % 3 == 0) c[static_cast<std::size_t>(i / 3 % 4)] = 40;
    EXPECT_TRUE(d.observe(window(c), 50, i).empty()) << "window " << i;
  }
  // 16 ms longer every window, 7% of the 217 ms step: under the 10% share.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(d.observe(window({200, 216, 208, 200}), 50, 20 + i).empty());
  // 30% (3 ms) longer than the others, but the steps are mostly all-reduce:
  // the job waits 2% of its 150 ms step for that rank.
  for (int i = 0; i < 6; ++i)
    EXPECT_TRUE(d.observe(window({10, 10, 13, 10}, {"n1", "n1", "n2", "n2"}, 150), 50, 30 + i).empty());
  // 50% slower, but only 1 ms per step: under the 2 ms floor.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(d.observe(window({2, 2, 3, 2}), 50, 30 + i).empty());
  // Every rank equally slow: nobody waits for anybody.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(d.observe(window({80, 80, 80, 80}), 50, 40 + i).empty());
  EXPECT_TRUE(d.reports().empty());
  // One rank is not a job with stragglers.
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(d.observe(window({80}, {"n1"}), 50, 50 + i).empty());
  EXPECT_TRUE(d.reports().empty());
}

// One rank per node: its node is named, with the rank.
TEST(Stragglers, TwoRanksCompareWithEachOther) {
  StragglerDetector d;
  std::vector<std::string> lines;
  for (int i = 0; i < 3; ++i) lines = d.observe(window({10, 30}, {"a", "b"}), 10, i);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("node b (rank 1) computes 200% longer"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("waits 20.0 ms of each"), std::string::npos) << lines[0];
}

TEST(Stragglers, ANodeWhoseRanksAreAllSlowIsNamedAsANode) {
  StragglerDetector d;
  std::vector<std::string> lines;
  for (int i = 0; i < 3; ++i) lines = d.observe(window({20, 20, 40, 45}), 50, i);
  ASSERT_EQ(lines.size(), 1u) << "one line for the node, not one per rank";
  EXPECT_EQ(lines[0],
            "dlscale: straggler: node n2 (ranks 2, 3) computes 125% longer than the median rank; the job waits "
            "25.0 ms of each 46.0 ms step for it");
  ASSERT_EQ(d.current().size(), 2u);
  EXPECT_TRUE(d.current()[0].whole_node && d.current()[1].whole_node);
  for (const auto& r : d.reports()) EXPECT_TRUE(r.whole_node) << r.rank;
  // On one host the same ranks are ranks, not a node.
  StragglerDetector one_host;
  for (int i = 0; i < 3; ++i) lines = one_host.observe(window({20, 20, 40, 45}, {"n", "n", "n", "n"}), 50, i);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("rank 2 (n)"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("rank 3 (n)"), std::string::npos) << lines[1];
}

TEST(Stragglers, ARecoveredRankIsSaidAndReported) {
  StragglerDetector d;
  for (int i = 0; i < 3; ++i) d.observe(window({20, 20, 20, 40}), 10, i);
  ASSERT_EQ(d.current().size(), 1u);
  // Two normal windows are not yet a recovery; a slow one in between starts over.
  EXPECT_TRUE(d.observe(window({20, 20, 20, 20}), 10, 3).empty());
  EXPECT_TRUE(d.observe(window({20, 20, 20, 20}), 10, 4).empty());
  EXPECT_TRUE(d.observe(window({20, 20, 20, 40}), 10, 5).empty());
  EXPECT_TRUE(d.observe(window({20, 20, 20, 20}), 10, 6).empty());
  EXPECT_TRUE(d.observe(window({20, 20, 20, 20}), 10, 7).empty());
  const auto lines = d.observe(window({20, 20, 20, 20}), 10, 8);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "dlscale: straggler recovered: rank 3 (n2) computes within the thresholds of the median rank "
                      "again");
  EXPECT_TRUE(d.current().empty());
  const auto reports = d.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_TRUE(reports[0].recovered);
  // Windows 2..7 while named: 20 ms excess in two of them (2 and 5), none in the others.
  EXPECT_EQ(reports[0].steps, 60);
  EXPECT_NEAR(reports[0].mean_excess_s, 0.040 / 6, 1e-9);
}

TEST(Stragglers, ThresholdsFromTheEnvironment) {
  unsetenv("DLSCALE_STRAGGLER_THRESHOLD");
  StragglerThresholds t = straggler_thresholds_from_environment();
  EXPECT_DOUBLE_EQ(t.min_share_of_step, 0.10);
  EXPECT_DOUBLE_EQ(t.min_excess_s, 0.002);
  EXPECT_EQ(t.windows, 3);
  setenv("DLSCALE_STRAGGLER_THRESHOLD", "25:20:2", 1);
  t = straggler_thresholds_from_environment();
  EXPECT_DOUBLE_EQ(t.min_share_of_step, 0.25);
  EXPECT_DOUBLE_EQ(t.min_excess_s, 0.020);
  EXPECT_EQ(t.windows, 2);
  StragglerDetector d(t);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(d.observe(window({20, 20, 20, 39}), 10, i).empty()) << "19 ms < 20 ms";
  EXPECT_TRUE(d.observe(window({20, 20, 20, 41}), 10, 4).empty());
  EXPECT_EQ(d.observe(window({20, 20, 20, 41}), 10, 5).size(), 1u) << "two windows of 21 ms";
  for (const char* bad : {"10", "10:2", "x:2:3", "10:2:0", "-5:2:3", "10:2:3:4"}) {
    setenv("DLSCALE_STRAGGLER_THRESHOLD", bad, 1);
    expect_error([] { straggler_thresholds_from_environment(); }, "is not PERCENT:MILLISECONDS:WINDOWS");
  }
  unsetenv("DLSCALE_STRAGGLER_THRESHOLD");
}

}  // namespace
}  // namespace dlscale::testing
