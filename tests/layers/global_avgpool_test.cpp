// globalavgpool: a hand-checked case, finite differences in float64,
// float32, and errors.
#include <gtest/gtest.h>

#include "expect_error.h"
#include "layer_factory.h"
#include "layers/gradient_check.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::check_gradients;
using testing::expect_error;
using testing::random_tensor;

TEST(GlobalAvgPool, AveragesEachChannelPlane) {
  auto layer = build_layer("globalavgpool", {2, 2, 3});
  EXPECT_EQ(layer->output_shape(), Shape({2}));
  EXPECT_TRUE(layer->params().empty());
  // Sample 0: channel 0 is 1..6 (mean 3.5), channel 1 is all -2; sample 1 is 0..11 / 2.
  Tensor x({2, 2, 2, 3}, DType::f64);
  for (int i = 0; i < 6; ++i) x.set(i, i + 1), x.set(6 + i, -2.0);
  for (int i = 0; i < 12; ++i) x.set(12 + i, i / 2.0);
  Tensor y = layer->forward(x, true);
  ASSERT_EQ(y.shape(), Shape({2, 2}));
  EXPECT_DOUBLE_EQ(y.at(0), 3.5);
  EXPECT_DOUBLE_EQ(y.at(1), -2.0);
  EXPECT_DOUBLE_EQ(y.at(2), 1.25);   // (0+0.5+...+2.5)/6
  EXPECT_DOUBLE_EQ(y.at(3), 4.25);   // (3+...+5.5)/6
  Tensor dy({2, 2}, DType::f64);
  for (int i = 0; i < 4; ++i) dy.set(i, 6.0 * (i + 1));
  Tensor dx = layer->backward(dy);
  ASSERT_EQ(dx.shape(), x.shape());
  for (int i = 0; i < 24; ++i) EXPECT_DOUBLE_EQ(dx.at(i), i / 6 + 1.0) << i;  // dy / 6 over each plane
}

TEST(GlobalAvgPool, Gradients) {
  for (const Shape& in : {Shape{3, 4, 5}, Shape{1, 1, 1}, Shape{2, 7, 7}}) {
    SCOPED_TRACE(to_string(in));
    auto layer = build_layer("globalavgpool", in);
    Rng rng(3);
    Shape xs{3};
    xs.insert(xs.end(), in.begin(), in.end());
    check_gradients(*layer, random_tensor(xs, rng));
  }
}

TEST(GlobalAvgPool, Float32) {
  auto layer = build_layer("globalavgpool", {4, 3, 3}, DType::f32);
  Rng rng(5);
  Tensor x = random_tensor({2, 4, 3, 3}, rng, DType::f32);
  Tensor y = layer->forward(x, true);
  EXPECT_EQ(y.dtype(), DType::f32);
  for (int p = 0; p < 8; ++p) {
    double s = 0;
    for (int i = 0; i < 9; ++i) s += x.at(p * 9 + i);
    EXPECT_NEAR(y.at(p), s / 9, 1e-6) << p;
  }
}

TEST(GlobalAvgPool, Errors) {
  expect_error([] { build_layer("globalavgpool", {16}); }, "globalavgpool: needs a C×H×W input, got 16");
  expect_error([] { build_layer("globalavgpool size=2", {1, 4, 4}); }, "unknown attribute 'size'");
  auto layer = build_layer("globalavgpool", {2, 3, 3});
  expect_error([&] { layer->forward(Tensor({1, 2, 3, 4}, DType::f64), true); },
               "globalavgpool: expected input N×2x3x3");
  expect_error([&] { layer->backward(Tensor({1, 2}, DType::f64)); }, "backward called without a forward");
  layer->forward(Tensor({1, 2, 3, 3}, DType::f64), true);
  expect_error([&] { layer->backward(Tensor({2, 2}, DType::f64)); }, "backward got dL/dy of shape");
}

}  // namespace
}  // namespace dlscale
