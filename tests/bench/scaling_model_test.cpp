// The scaling model's functions (bench/scaling_model.h) on hand-checked cases.
#include "scaling_model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

namespace dlscale::bench {
namespace {

TEST(ScalingModel, FitRecoversAnExactLine) {
  const AlphaBeta f = fit_alpha_beta({{4096, 10e-6 + 4096e-9}, {1 << 20, 10e-6 + (1 << 20) * 1e-9}, {64 << 20, 10e-6 + (64 << 20) * 1e-9}});
  EXPECT_NEAR(f.alpha, 10e-6, 1e-12);
  EXPECT_NEAR(f.beta, 1e-9, 1e-18);
}

TEST(ScalingModel, FitWeighsRelativeResiduals) {
  // Two small sizes on a 5 us latency and one large size 10 % off the line:
  // relative weights keep alpha near 5 us (plain least squares would be pulled by the large point).
  const AlphaBeta f = fit_alpha_beta({{1000, 5e-6 + 1e-6}, {2000, 5e-6 + 2e-6}, {1e8, 1.1 * (5e-6 + 0.1)}});
  EXPECT_NEAR(f.alpha, 5e-6, 0.3e-6);
  EXPECT_GT(f.at(4096), 0);
}

TEST(ScalingModel, FitNeedsTwoSizesAndPositiveTimes) {
  EXPECT_THROW(fit_alpha_beta({{4096, 1e-5}, {4096, 2e-5}}), std::invalid_argument);
  EXPECT_THROW(fit_alpha_beta({{4096, 1e-5}, {8192, 0}}), std::invalid_argument);
}

std::vector<LayerCost> layers(std::initializer_list<std::pair<double, double>> costs) {
  std::vector<LayerCost> out;
  for (auto [s, bytes] : costs) out.push_back({"l" + std::to_string(out.size()), s, bytes});
  return out;
}

// Regimes (a protocol switch, a token bucket's burst): the fit finds the
// splits between them and each line; one regime stays one line.
TEST(ScalingModel, AllreduceFitFindsTheRegimesAndKeepsOneLineForOne) {
  std::vector<Point> pts;
  for (double s : {4096.0, 16384.0, 65536.0}) pts.push_back({s, 50e-6 + 1e-9 * s});
  for (double s : {1048576.0, 4194304.0, 16777216.0, 67108864.0}) pts.push_back({s, 16e-9 * s});
  const AllreduceFit two = fit_allreduce(pts);
  ASSERT_EQ(two.splits.size(), 1u);
  EXPECT_NEAR(two.splits[0], std::sqrt(65536.0 * 1048576.0), 1);
  EXPECT_NEAR(two.lines[0].alpha, 50e-6, 1e-9);
  EXPECT_NEAR(two.lines[1].beta, 16e-9, 1e-15);
  EXPECT_LT(worst_relative_residual(two, pts), 1e-6);
  const AlphaBeta one_line = fit_alpha_beta(pts);
  EXPECT_GT(worst_relative_residual(AllreduceFit{{one_line}, {}}, pts), 0.5);

  // A third regime above 64 MiB (a slower algorithm for the largest sizes).
  std::vector<Point> three = pts;
  three.back() = {64.0 * (1 << 20), 1e-3 + 12e-9 * 64 * (1 << 20)};
  for (double s : {128.0 * (1 << 20), 256.0 * (1 << 20), 512.0 * (1 << 20)}) three.push_back({s, 0.2 + 30e-9 * s});
  const AllreduceFit f3 = fit_allreduce(three);
  ASSERT_EQ(f3.splits.size(), 2u);
  EXPECT_NEAR(f3.at(256.0 * (1 << 20)), 0.2 + 30e-9 * 256 * (1 << 20), 1e-9);
  EXPECT_NEAR(f3.at(8192), 50e-6 + 1e-9 * 8192, 1e-12);

  std::vector<Point> line;
  for (double s : {4096.0, 65536.0, 1048576.0, 16777216.0}) line.push_back({s, 10e-6 + 1e-9 * s});
  const AllreduceFit one = fit_allreduce(line);
  EXPECT_TRUE(one.splits.empty());
  EXPECT_NEAR(one.at(1 << 20), 10e-6 + 1e-9 * (1 << 20), 1e-12);
}

TEST(ScalingModel, PlanFollowsGradientBuckets) {
  const double mib = 1 << 20;
  // Backward order: 0.5 MiB, no params, 0.75 MiB, 3 MiB, 2 MiB, 4 MiB; buckets of 5 MiB, the first at most 1 MiB.
  const auto plan = plan_buckets(layers({{1, 0.5 * mib}, {1, 0}, {1, 0.75 * mib}, {1, 3 * mib}, {1, 2 * mib}, {1, 4 * mib}}), 5 * mib);
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0].layers, std::vector<std::size_t>{0});
  EXPECT_EQ(plan[1].layers, (std::vector<std::size_t>{2, 3}));
  EXPECT_EQ(plan[2].layers, std::vector<std::size_t>{4});
  EXPECT_EQ(plan[3].layers, std::vector<std::size_t>{5});
  EXPECT_DOUBLE_EQ(plan[1].bytes, 3.75 * mib);
  // A layer larger than the bucket gets a bucket of its own.
  EXPECT_EQ(plan_buckets(layers({{1, 8 * mib}, {1, 8 * mib}}), 5 * mib).size(), 2u);
}

TEST(ScalingModel, RecurrenceByHand) {
  // Backward: 3 layers of 10, 20, 30 ms; buckets {0}, {1, 2}; T = 1 ms + 1 ms per byte.
  const auto ls = layers({{0.010, 1}, {0.020, 2}, {0.030, 3}});
  const std::vector<Bucket> buckets = {{1, {0}}, {5, {1, 2}}};
  EXPECT_EQ(ready_times(ls, buckets), (std::vector<double>{0.010, 0.060}));
  auto t = [](double bytes, bool) { return 0.001 + 0.001 * bytes; };
  // c0 = 0.010 + 0.002 = 0.012; c1 = max(0.060, 0.012) + 0.006 = 0.066; step = 5 + 66 + 1 ms.
  StepPrediction p = predict_step(0.005, ls, 0.001, buckets, t);
  EXPECT_NEAR(p.comm_done, 0.066, 1e-12);
  EXPECT_NEAR(p.step, 0.072, 1e-12);
  EXPECT_NEAR(p.exposed, 0.006, 1e-12);
  // A long first all-reduce delays the second: c0 = 0.010 + 0.101 = 0.111, c1 = 0.117.
  auto slow_first = [](double bytes, bool last) { return last ? 0.006 : 0.101 + 0 * bytes; };
  EXPECT_NEAR(predict_step(0.005, ls, 0.001, buckets, slow_first).comm_done, 0.117, 1e-12);
  // Without overlap every all-reduce waits for the end of backward: 0.060 + 0.002 + 0.006.
  EXPECT_NEAR(predict_step(0.005, ls, 0.001, buckets, t, false).comm_done, 0.068, 1e-12);
  // The last bucket's call is told it is the last.
  std::vector<bool> lasts;
  predict_step(0, ls, 0, buckets, [&](double, bool last) { lasts.push_back(last); return 0.0; });
  EXPECT_EQ(lasts, (std::vector<bool>{false, true}));
}

TEST(ScalingModel, ClusterCosts) {
  Cluster c;
  c.nvlink_bytes_per_s = 100e9, c.alpha_nvlink_s = 1e-6, c.link_bytes_per_s = 10e9, c.alpha_net_s = 5e-6;
  // One node: both are the in-node ring, 2*7 hops and 2*7/8 of the bytes.
  EXPECT_NEAR(hierarchical_seconds(c, 8, 1e9), 14e-6 + 1.75e9 / 100e9, 1e-12);
  EXPECT_NEAR(flat_ring_seconds(c, 8, 1e9), hierarchical_seconds(c, 8, 1e9), 1e-12);
  // Four nodes, one NIC: in node as above, plus 2*3 hops and 2*3/4 of the node's bytes over its link.
  EXPECT_NEAR(hierarchical_seconds(c, 32, 1e9), 14e-6 + 0.0175 + 30e-6 + 1.5e9 / 10e9, 1e-12);
  EXPECT_NEAR(flat_ring_seconds(c, 32, 1e9), 62 * 5e-6 + 62.0 / 32 * 1e9 / 10e9, 1e-12);
  c.nics_per_node = 8;
  EXPECT_NEAR(hierarchical_seconds(c, 32, 1e9), 14e-6 + 0.0175 + 30e-6 + 1.5e9 / 80e9, 1e-12);
  EXPECT_EQ(hierarchical_seconds(c, 1, 1e9), 0);
}

double total(const std::vector<LayerShape>& ls, double LayerShape::*field) {
  double s = 0;
  for (const auto& l : ls) s += l.*field;
  return s;
}

TEST(ScalingModel, ReferenceNetworksHaveTheirPublishedSizes) {
  EXPECT_EQ(total(vgg16_layers(), &LayerShape::params), 138357544);  // torchvision vgg16
  EXPECT_NEAR(total(vgg16_layers(), &LayerShape::macs), 15.47e9, 0.01e9);
  EXPECT_NEAR(total(resnet50_layers(), &LayerShape::params), 25.56e6, 0.01e6);  // torchvision resnet50: 25,557,032
  EXPECT_NEAR(total(resnet50_layers(), &LayerShape::macs), 4.09e9, 0.03e9);
  EXPECT_NEAR(total(resnet101_layers(), &LayerShape::params), 44.55e6, 0.01e6);  // torchvision resnet101: 44,549,160
  EXPECT_NEAR(total(resnet101_layers(), &LayerShape::macs), 7.8e9, 0.05e9);
}

}  // namespace
}  // namespace dlscale::bench
