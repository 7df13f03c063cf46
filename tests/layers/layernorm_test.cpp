// Layer normalization: each position normalized over its features, learned
// scale and offset, finite differences (sequence and vector samples), errors.
#include <gtest/gtest.h>

#include <cmath>

#include "expect_error.h"
#include "layer_factory.h"
#include "layers/gradient_check.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::check_gradients;
using testing::expect_error;
using testing::random_tensor;

TEST(LayerNorm, NormalizesEachPosition) {
  auto layer = build_layer("layernorm epsilon=0.000001", {2, 4});
  ASSERT_EQ(layer->params().size(), 2u);
  Tensor x({1, 2, 4}, DType::f64);
  const double values[8] = {1, 2, 3, 4, 10, 10, 10, 14};
  for (int i = 0; i < 8; ++i) x.set(i, values[i]);
  Tensor y = layer->forward(x, true);
  // Row 0: mean 2.5, variance 1.25. Row 1: mean 11, variance 3.
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(y.at(j), (values[j] - 2.5) / std::sqrt(1.25 + 1e-6), 1e-12);
  for (int j = 0; j < 4; ++j) EXPECT_NEAR(y.at(4 + j), (values[4 + j] - 11) / std::sqrt(3 + 1e-6), 1e-12);
  // Scale and offset apply per feature.
  Param* scale = layer->params()[0];
  Param* offset = layer->params()[1];
  scale->value.set(1, 2.0);
  offset->value.set(3, -1.0);
  Tensor y2 = layer->forward(x, true);
  EXPECT_NEAR(y2.at(5), 2.0 * y.at(5), 1e-12);
  EXPECT_NEAR(y2.at(7), y.at(7) - 1.0, 1e-12);
}

TEST(LayerNorm, FiniteDifferences) {
  for (const Shape& in : {Shape{3, 5}, Shape{6}, Shape{1, 2}}) {
    SCOPED_TRACE(to_string(in));
    auto layer = build_layer("layernorm", in);
    Rng rng(3);
    // Non-trivial scale and offset so their gradients are exercised.
    for (Param* p : layer->params())
      for (std::int64_t i = 0; i < p->value.numel(); ++i) p->value.set(i, rng.normal(0.5, 1.0));
    Shape xs{2};
    xs.insert(xs.end(), in.begin(), in.end());
    check_gradients(*layer, random_tensor(xs, rng), true, 1e-6, 1e-5);
  }
}

TEST(LayerNorm, Errors) {
  expect_error([] { build_layer("layernorm epsilon=0", {4}); }, "epsilon must be positive");
  auto layer = build_layer("layernorm", {2, 3});
  expect_error([&] { layer->forward(Tensor({1, 3, 2}, DType::f64), true); }, "expects N x 2x3");
  expect_error([&] { layer->backward(Tensor({1, 2, 3}, DType::f64)); }, "backward got dL/dy");
}

}  // namespace
}  // namespace dlscale
