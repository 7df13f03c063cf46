// maxpool and avgpool: against a plain-loop reference over several
// size/stride/padding combinations, hand-checked cases (ties, count-include-pad),
// finite differences in float64, float32 and spec errors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "layer_factory.h"
#include "expect_error.h"
#include "layers/gradient_check.h"
#include "layers/registry.h"
#include "runtime/core/blas.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::expect_error;
using testing::check_gradients;
using testing::expect_close;
using testing::random_tensor;

Tensor filled(const Shape& shape, std::vector<double> values) {
  Tensor t(shape, DType::f64);
  for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
  return t;
}

// The reference, by the definition, in double: x is (N, C, H, W); returns
// y (N, C, OH, OW). Max skips padded positions; average divides by K·K.
Tensor reference_pool(const Tensor& x, bool is_max, std::int64_t K, std::int64_t S, std::int64_t P) {
  const std::int64_t N = x.dim(0), C = x.dim(1), H = x.dim(2), W = x.dim(3);
  const std::int64_t OH = (H + 2 * P - K) / S + 1, OW = (W + 2 * P - K) / S + 1;
  Tensor y({N, C, OH, OW}, DType::f64);
  for (std::int64_t nc = 0; nc < N * C; ++nc)
    for (std::int64_t oh = 0; oh < OH; ++oh)
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity(), sum = 0;
        for (std::int64_t kh = 0; kh < K; ++kh)
          for (std::int64_t kw = 0; kw < K; ++kw) {
            const std::int64_t ih = oh * S - P + kh, iw = ow * S - P + kw;
            if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
            const double v = x.at((nc * H + ih) * W + iw);
            best = std::max(best, v);
            sum += v;
          }
        y.set((nc * OH + oh) * OW + ow, is_max ? best : sum / static_cast<double>(K * K));
      }
  return y;
}

struct Case {
  std::int64_t size, stride, padding;
};
const std::vector<Case> kCases = {{2, 2, 0}, {3, 2, 1}, {3, 1, 1}, {2, 1, 0}, {3, 3, 0}, {3, 2, 2}, {1, 1, 0}};

std::string attrs(const Case& c) {
  return "size=" + std::to_string(c.size) + " stride=" + std::to_string(c.stride) +
         " padding=" + std::to_string(c.padding);
}

TEST(Pool2d, MatchesReference) {
  const int before = cpu_threads();
  for (int threads : {1, 3}) {
    set_cpu_threads(threads);
    for (const char* kind : {"maxpool", "avgpool"}) {
      for (const Case& c : kCases) {
        SCOPED_TRACE(std::string(kind) + " " + attrs(c) + " threads " + std::to_string(threads));
        auto layer = build_layer(std::string(kind) + " " + attrs(c), {3, 7, 6});
        Rng rng(4);
        Tensor x = random_tensor({2, 3, 7, 6}, rng);
        Tensor y = layer->forward(x, true);
        expect_close(y, reference_pool(x, kind == std::string("maxpool"), c.size, c.stride, c.padding), 1e-14, "y");
        EXPECT_EQ(Shape(y.shape().begin() + 1, y.shape().end()), layer->output_shape());
      }
    }
  }
  set_cpu_threads(before);
}

TEST(Pool2d, MaxHandChecked) {
  auto layer = build_layer("maxpool size=2", {1, 4, 4});
  EXPECT_EQ(layer->output_shape(), Shape({1, 2, 2}));
  Tensor x = filled({1, 1, 4, 4}, {1, 5, 2, 0,  //
                                   3, 4, 8, 1,  //
                                   0, 0, 1, 1,  //
                                   9, 0, 1, 1});
  Tensor y = layer->forward(x, true);
  const double expect_y[] = {5, 8, 9, 1};
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(y.at(i), expect_y[i]) << i;
  // Ties (the bottom-right window is all ones) send the gradient to the first maximum only.
  Tensor dx = layer->backward(filled({1, 1, 2, 2}, {10, 20, 30, 40}));
  const double expect_dx[] = {0, 10, 0, 0, 0, 0, 20, 0, 0, 0, 40, 0, 30, 0, 0, 0};
  for (int i = 0; i < 16; ++i) EXPECT_DOUBLE_EQ(dx.at(i), expect_dx[i]) << i;
}

TEST(Pool2d, MaxIgnoresPadding) {
  // All-negative input: were padded zeros counted, the edge windows would give 0.
  auto layer = build_layer("maxpool size=3 stride=1 padding=1", {1, 2, 2});
  Tensor y = layer->forward(filled({1, 1, 2, 2}, {-4, -3, -2, -1}), true);
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(y.at(i), -1.0) << i;
}

TEST(Pool2d, AverageHandCheckedCountsPadding) {
  auto plain = build_layer("avgpool size=2", {1, 2, 4});
  Tensor y = plain->forward(filled({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8}), true);
  ASSERT_EQ(y.shape(), Shape({1, 1, 1, 2}));
  EXPECT_DOUBLE_EQ(y.at(0), 3.5);
  EXPECT_DOUBLE_EQ(y.at(1), 5.5);
  Tensor dx = plain->backward(filled({1, 1, 1, 2}, {4, 8}));
  const double expect_dx[] = {1, 1, 2, 2, 1, 1, 2, 2};
  for (int i = 0; i < 8; ++i) EXPECT_DOUBLE_EQ(dx.at(i), expect_dx[i]) << i;

  // 3x3 ones, size 3, padding 1: a corner window holds 4 real ones of 9, an edge 6, the center 9.
  auto padded = build_layer("avgpool size=3 stride=1 padding=1", {1, 3, 3});
  y = padded->forward(filled({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1}), true);
  const double expect_y[] = {4, 6, 4, 6, 9, 6, 4, 6, 4};
  for (int i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(y.at(i), expect_y[i] / 9.0) << i;
}

TEST(Pool2d, Gradients) {
  // Random normals have no ties and gaps far above the step h, so max is differentiable here.
  for (const char* kind : {"maxpool", "avgpool"}) {
    for (const Case& c : {Case{2, 2, 0}, Case{3, 2, 1}, Case{3, 1, 1}}) {
      SCOPED_TRACE(std::string(kind) + " " + attrs(c));
      auto layer = build_layer(std::string(kind) + " " + attrs(c), {2, 5, 4});
      Rng rng(9);
      check_gradients(*layer, random_tensor({2, 2, 5, 4}, rng));
    }
  }
}

TEST(Pool2d, Float32) {
  for (const char* kind : {"maxpool", "avgpool"}) {
    SCOPED_TRACE(kind);
    auto layer = build_layer(std::string(kind) + " size=3 stride=2 padding=1", {2, 6, 6});
    Rng rng(5);
    Tensor x = random_tensor({3, 2, 6, 6}, rng, DType::f32);
    Tensor y = layer->forward(x, true);
    EXPECT_EQ(y.dtype(), DType::f32);
    expect_close(y.to(DType::f64), reference_pool(x.to(DType::f64), kind == std::string("maxpool"), 3, 2, 1), 1e-6,
                 "float32 y");
    Tensor dx = layer->backward(random_tensor(y.shape(), rng, DType::f32));
    EXPECT_EQ(dx.dtype(), DType::f32);
    EXPECT_EQ(dx.shape(), x.shape());
  }
}

TEST(Pool2d, SpecErrors) {
  expect_error([] { build_layer("maxpool size=2", {784}); }, "maxpool: needs a C×H×W input, got 784");
  expect_error([] { build_layer("avgpool size=4", {1, 3, 3}); }, "avgpool: size 4 larger than padded input 3x3");
  expect_error([] { build_layer("maxpool size=2 padding=2", {1, 8, 8}); }, "padding=2 must be between 0 and size-1 = 1");
  expect_error([] { build_layer("maxpool size=0", {1, 8, 8}); }, "size=0 must be at least 1");
  expect_error([] { build_layer("maxpool size=2 stride=0", {1, 8, 8}); }, "stride=0 must be at least 1");
  expect_error([] { build_layer("maxpool stride=2", {1, 8, 8}); }, "missing attribute 'size'");
  expect_error([] { build_layer("avgpool size=2 kernel=2", {1, 8, 8}); }, "unknown attribute 'kernel'");
  auto layer = build_layer("maxpool size=2", {1, 4, 4});
  Rng rng(1);
  expect_error([&] { layer->forward(random_tensor({2, 4, 4}, rng), true); }, "maxpool: expected input N×1x4x4, got 2x4x4");
}

}  // namespace
}  // namespace dlscale
