// flatten: shapes both ways, data passed through unchanged, finite
// differences, float32 and errors.
#include <gtest/gtest.h>

#include <functional>

#include "layer_factory.h"
#include "expect_error.h"
#include "layers/gradient_check.h"
#include "layers/registry.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::expect_error;
using testing::check_gradients;
using testing::expect_close;
using testing::random_tensor;

TEST(Flatten, ShapesAndValues) {
  auto layer = build_layer("flatten", {2, 3, 4});
  EXPECT_EQ(layer->output_shape(), Shape({24}));
  EXPECT_TRUE(layer->params().empty());
  Rng rng(2);
  Tensor x = random_tensor({5, 2, 3, 4}, rng);
  Tensor y = layer->forward(x, true);
  ASSERT_EQ(y.shape(), Shape({5, 24}));
  expect_close(y, x.reshaped({5, 24}), 0, "y");  // row-major: sample n, index (c·H + h)·W + w
  Tensor dy = random_tensor({5, 24}, rng);
  Tensor dx = layer->backward(dy);
  ASSERT_EQ(dx.shape(), x.shape());
  expect_close(dx, dy.reshaped(x.shape()), 0, "dx");
}

TEST(Flatten, VectorInputIsUnchanged) {
  auto layer = build_layer("flatten", {7});
  EXPECT_EQ(layer->output_shape(), Shape({7}));
  Rng rng(3);
  Tensor x = random_tensor({2, 7}, rng);
  expect_close(layer->forward(x, false), x, 0, "y");
}

TEST(Flatten, Gradients) {
  auto layer = build_layer("flatten", {2, 2, 3});
  Rng rng(4);
  check_gradients(*layer, random_tensor({3, 2, 2, 3}, rng));
}

TEST(Flatten, Float32) {
  auto layer = build_layer("flatten", {3, 2});
  Rng rng(5);
  Tensor x = random_tensor({4, 3, 2}, rng, DType::f32);
  Tensor y = layer->forward(x, true);
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.shape(), Shape({4, 6}));
  EXPECT_EQ(layer->backward(random_tensor({4, 6}, rng, DType::f32)).shape(), x.shape());
}

TEST(Flatten, Errors) {
  expect_error([] { build_layer("flatten dims=2", {2, 3}); }, "unknown attribute 'dims'");
  auto layer = build_layer("flatten", {2, 3});
  Rng rng(6);
  expect_error([&] { layer->forward(random_tensor({4, 3, 2}, rng), true); }, "flatten: expected input N×2x3, got 4x3x2");
  layer->forward(random_tensor({4, 2, 3}, rng), true);
  expect_error([&] { layer->backward(random_tensor({4, 5}, rng)); }, "expected N×6");
}

}  // namespace
}  // namespace dlscale
