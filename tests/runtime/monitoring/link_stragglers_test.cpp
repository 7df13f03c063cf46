// Link straggler detection on made-up probes and windows: a host whose probe
// is slow while the job waits in its all-reduce is named with its cost after
// three windows, recovers after three normal ones, and is kept in the report;
// a slow probe while the job hardly waits, uniform probes, and a job of two
// hosts (nothing faster to compare with) name nobody; rank 0's host is named
// when every download from it is slow.
#include <gtest/gtest.h>

#include "runtime/monitoring/link_stragglers.h"

namespace dlscale::testing {
namespace {

// Three hosts, one rank each (rank 0 on n1); every rank computes 30 ms and
// waits wait_ms in the all-reduce.
std::vector<RankWindow> ranks(double wait_ms) {
  std::vector<RankWindow> w;
  const char* hosts[] = {"n1", "n2", "n3"};
  for (int r = 0; r < 3; ++r) w.push_back({r, hosts[r], (30 + wait_ms) / 1000, 0.030});
  return w;
}
// n2's and n3's probe times in ms (upload, download).
std::vector<LinkWindow> links(double n2_up, double n2_down, double n3_up = 0.5, double n3_down = 0.5) {
  return {{"n2", n2_up / 1000, n2_down / 1000}, {"n3", n3_up / 1000, n3_down / 1000}};
}

// 384 KiB of gradients on 3 ranks: 2 × 2/3 × 384 KiB = 512 KiB over each
// link per step, two 256 KiB probes' worth.
LinkStragglerDetector detector() {
  LinkStragglerDetector d({}, 256 * 1024);
  d.set_reduce_bytes(384 * 1024);
  return d;
}

TEST(LinkStragglers, ASlowLinkIsNamedWithWhatItCostsTheJob) {
  LinkStragglerDetector d = detector();
  EXPECT_TRUE(d.observe(links(10, 10), ranks(20), 100, 5).empty());
  EXPECT_TRUE(d.observe(links(10, 10), ranks(20), 100, 10).empty());
  const auto lines = d.observe(links(10, 10), ranks(20), 100, 15);
  ASSERT_EQ(lines.size(), 1u);
  // 9.5 ms more than the fastest per probe, two probes' worth per step: 19 ms.
  EXPECT_EQ(lines[0],
            "dlscale: link straggler: rank 1 (n2): its link costs the job 19.0 ms of each 50.0 ms step (a 256 KiB "
            "probe to n1 takes 10.0 ms, the fastest link 0.5 ms)");
  ASSERT_EQ(d.current().size(), 1u);
  EXPECT_EQ(d.current()[0].host, "n2");
  EXPECT_EQ(d.current()[0].ranks, std::vector<int>{1});
}

TEST(LinkStragglers, ASlowUploadAloneIsEnough) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 3; ++i) d.observe(links(8, 0.6), ranks(20), 100, i);
  ASSERT_EQ(d.current().size(), 1u);
  EXPECT_EQ(d.current()[0].host, "n2");
  EXPECT_NEAR(d.current()[0].probe_s, 0.008, 1e-12);
}

TEST(LinkStragglers, ASlowProbeIsNotNamedWhenTheJobHardlyWaits) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(d.observe(links(10, 10), ranks(1), 100, i).empty());
  EXPECT_TRUE(d.reports().empty());
}

// Under load a fast link's probe wanders by a millisecond: twice the
// fastest, but a few ms per step, below 10% of the step.
TEST(LinkStragglers, JitterOnFastLinksNamesNobody) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(d.observe(links(0.4, 1.6, 0.5, 1.2), ranks(20), 100, i).empty());
}

TEST(LinkStragglers, TheWaitBoundsTheCost) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 3; ++i) d.observe(links(50, 50), ranks(20), 100, i);
  ASSERT_EQ(d.current().size(), 1u);
  EXPECT_NEAR(d.current()[0].cost_s, 0.020, 1e-12) << "a link cannot cost more than the job waits";
}

TEST(LinkStragglers, NothingIsNamedWithoutTheGradientBytes) {
  LinkStragglerDetector d({}, 256 * 1024);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(d.observe(links(10, 10), ranks(20), 100, i).empty());
}

TEST(LinkStragglers, EvenLinksNameNobody) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(d.observe(links(0.9, 0.7), ranks(20), 100, i).empty());
}

TEST(LinkStragglers, TwoHostsHaveNothingToCompareWith) {
  LinkStragglerDetector d = detector();
  std::vector<RankWindow> two = {{0, "n1", 0.05, 0.03}, {1, "n2", 0.05, 0.03}};
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(d.observe({{"n2", 0.010, 0.010}}, two, 100, i).empty());
}

TEST(LinkStragglers, Rank0sHostIsNamedWhenEveryDownloadIsSlow) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 3; ++i) d.observe(links(0.5, 10, 0.5, 12), ranks(20), 100, i);
  ASSERT_EQ(d.current().size(), 1u);
  EXPECT_EQ(d.current()[0].host, "n1");
  EXPECT_NEAR(d.current()[0].probe_s, 0.010, 1e-12) << "the fastest download: the shared end is no slower";
}

TEST(LinkStragglers, Rank0sHostRecoversToo) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 3; ++i) d.observe(links(0.5, 10, 0.5, 12), ranks(20), 100, i);
  std::vector<std::string> lines;
  for (int i = 3; i < 6; ++i) lines = d.observe(links(0.5, 0.5), ranks(1), 100, i);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "dlscale: link straggler recovered: n1's link is within the thresholds again");
  ASSERT_EQ(d.reports().size(), 1u);
  EXPECT_TRUE(d.reports()[0].recovered);
}

TEST(LinkStragglers, ARecoveredLinkIsSaidAndKeptInTheReport) {
  LinkStragglerDetector d = detector();
  for (int i = 0; i < 3; ++i) d.observe(links(10, 10), ranks(20), 100, i);
  std::vector<std::string> lines;
  for (int i = 3; i < 6; ++i) lines = d.observe(links(0.5, 0.5), ranks(1), 100, i);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], "dlscale: link straggler recovered: n2's link is within the thresholds again");
  const auto reports = d.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].host, "n2");
  EXPECT_TRUE(reports[0].recovered);
  // As for compute stragglers: the windows from the one it was named in to
  // the one it recovered in, 19 ms of a 50 ms step, then two of 0 of 31 ms.
  EXPECT_EQ(reports[0].steps, 300);
  EXPECT_NEAR(reports[0].mean_cost_s, 0.019 / 3, 1e-9);
  EXPECT_NEAR(reports[0].share_of_step, 0.019 / (0.050 + 0.031 + 0.031), 1e-9);
}

}  // namespace
}  // namespace dlscale::testing
