// Dense layer: a hand-checked case, the implicit flatten of N-d samples,
// finite-difference gradients, float32, initialization and spec errors.
#include <gtest/gtest.h>

#include <cmath>
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

Tensor filled(const Shape& shape, std::vector<double> values, DType dtype = DType::f64) {
  Tensor t(shape, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
  return t;
}

// y (N, U) = x (N, F) · Wᵀ + b with plain loops, in double.
Tensor reference_dense(const Tensor& x, const Tensor& w, const Tensor* b) {
  const std::int64_t n = x.dim(0), units = w.dim(0), f = w.dim(1);
  Tensor y({n, units}, DType::f64);
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t u = 0; u < units; ++u) {
      double s = b ? b->at(u) : 0.0;
      for (std::int64_t k = 0; k < f; ++k) s += x.at(i * f + k) * w.at(u * f + k);
      y.set(i * units + u, s);
    }
  return y;
}

TEST(Dense, HandChecked) {
  auto layer = build_layer("dense units=2", {3});
  EXPECT_EQ(layer->output_shape(), Shape({2}));
  auto params = layer->params();
  ASSERT_EQ(params.size(), 2u);
  params[0]->value.copy_from(filled({2, 3}, {1, 2, 3, 4, 5, 6}));
  params[1]->value.copy_from(filled({2}, {0.5, -1}));
  Tensor y = layer->forward(filled({2, 3}, {1, 0, -1, 2, 1, 0}), true);
  ASSERT_EQ(y.shape(), Shape({2, 2}));
  EXPECT_DOUBLE_EQ(y.at(0), -1.5);
  EXPECT_DOUBLE_EQ(y.at(1), -3.0);
  EXPECT_DOUBLE_EQ(y.at(2), 4.5);
  EXPECT_DOUBLE_EQ(y.at(3), 12.0);

  Tensor dx = layer->backward(filled({2, 2}, {1, 0, 0, 1}));
  const double dw[] = {1, 0, -1, 2, 1, 0}, dxv[] = {1, 2, 3, 4, 5, 6};
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(params[0]->grad.at(i), dw[i]) << i;
  for (int i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(dx.at(i), dxv[i]) << i;
  EXPECT_DOUBLE_EQ(params[1]->grad.at(0), 1.0);
  EXPECT_DOUBLE_EQ(params[1]->grad.at(1), 1.0);
}

TEST(Dense, FlattensMultiDimensionalSamples) {
  auto layer = build_layer("dense units=5", {2, 3, 2});
  EXPECT_EQ(layer->params()[0]->value.shape(), Shape({5, 12}));
  Rng rng(3);
  layer->params()[1]->value.copy_from(random_tensor({5}, rng));
  Tensor x = random_tensor({4, 2, 3, 2}, rng);
  Tensor y = layer->forward(x, true);
  expect_close(y, reference_dense(x.reshaped({4, 12}), layer->params()[0]->value, &layer->params()[1]->value), 1e-12,
               "y");
  Tensor dx = layer->backward(random_tensor({4, 5}, rng));
  EXPECT_EQ(dx.shape(), x.shape());
}

// per_position=true: one W for every position of a T×F sample, so each
// output row is the plain dense of the matching input row.
TEST(Dense, PerPositionAppliesTheSameWeightsAtEveryPosition) {
  auto layer = build_layer("dense units=5 per_position=true", {3, 4});
  EXPECT_EQ(layer->output_shape(), Shape({3, 5}));
  EXPECT_EQ(layer->params()[0]->value.shape(), Shape({5, 4}));
  Rng rng(3);
  layer->params()[1]->value.copy_from(random_tensor({5}, rng));
  Tensor x = random_tensor({2, 3, 4}, rng);
  Tensor y = layer->forward(x, true);
  ASSERT_EQ(y.shape(), Shape({2, 3, 5}));
  expect_close(y.reshaped({6, 5}),
               reference_dense(x.reshaped({6, 4}), layer->params()[0]->value, &layer->params()[1]->value), 1e-12, "y");
  check_gradients(*layer, x);
  expect_error([] { build_layer("dense units=5 per_position=true", {4}); }, "per_position=true needs positions");
  expect_error([&] { layer->forward(x, true), layer->backward(Tensor({2, 5}, DType::f64)); },
               "but the forward output was 2x3x5");
}

TEST(Dense, GradientsWithBias) {
  auto layer = build_layer("dense units=4", {2, 3});
  Rng rng(5);
  layer->params()[1]->value.copy_from(random_tensor({4}, rng));
  check_gradients(*layer, random_tensor({3, 2, 3}, rng));
}

TEST(Dense, GradientsWithoutBias) {
  auto layer = build_layer("dense units=3 bias=false", {5});
  ASSERT_EQ(layer->params().size(), 1u);
  Rng rng(6);
  check_gradients(*layer, random_tensor({4, 5}, rng));
}

TEST(Dense, BackwardOverwritesGradients) {
  auto layer = build_layer("dense units=3", {4});
  Rng rng(8);
  Tensor x = random_tensor({2, 4}, rng), dy = random_tensor({2, 3}, rng);
  layer->forward(x, true);
  layer->backward(dy);
  Tensor first = layer->params()[0]->grad.clone();
  layer->forward(x, true);
  layer->backward(dy);
  expect_close(layer->params()[0]->grad, first, 0, "dW after a second backward");
}

TEST(Dense, Float32MatchesFloat64Reference) {
  auto layer = build_layer("dense units=7", {9}, DType::f32);
  EXPECT_EQ(layer->params()[0]->value.dtype(), DType::f32);
  Rng rng(9);
  layer->params()[1]->value.copy_from(random_tensor({7}, rng, DType::f32));
  Tensor x = random_tensor({6, 9}, rng, DType::f32);
  Tensor y = layer->forward(x, true);
  EXPECT_EQ(y.dtype(), DType::f32);
  expect_close(y.to(DType::f64),
               reference_dense(x.to(DType::f64), layer->params()[0]->value.to(DType::f64),
                               &layer->params()[1]->value),
               1e-5, "float32 y");
  Tensor dx = layer->backward(random_tensor({6, 7}, rng, DType::f32));
  EXPECT_EQ(dx.dtype(), DType::f32);
}

TEST(Dense, HeNormalInitialization) {
  auto layer = build_layer("dense units=100", {500});
  const Param& w = *layer->params()[0];
  const Param& b = *layer->params()[1];
  double sum = 0, sq = 0;
  for (std::int64_t i = 0; i < w.value.numel(); ++i) sum += w.value.at(i), sq += w.value.at(i) * w.value.at(i);
  const double n = static_cast<double>(w.value.numel()), mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), std::sqrt(2.0 / 500), 0.002);
  for (std::int64_t i = 0; i < b.value.numel(); ++i) EXPECT_EQ(b.value.at(i), 0.0);
  EXPECT_TRUE(w.regularize);
  EXPECT_FALSE(b.regularize);
  EXPECT_EQ(w.grad.shape(), w.value.shape());
  EXPECT_EQ(b.grad.shape(), b.value.shape());
  // Same seed, same weights: runs are reproducible.
  auto again = build_layer("dense units=100", {500});
  expect_close(again->params()[0]->value, w.value, 0, "weights from the same seed");
}

TEST(Dense, SpecErrors) {
  expect_error([] { build_layer("dense", {4}); }, "missing attribute 'units'");
  expect_error([] { build_layer("dense units=0", {4}); }, "units=0 must be at least 1");
  expect_error([] { build_layer("dense units=3 biass=false", {4}); }, "unknown attribute 'biass'");
  expect_error([] { build_layer("dense units=3 bias=maybe", {4}); }, "bias=maybe is not true or false");
}

TEST(Dense, ForwardErrors) {
  auto layer = build_layer("dense units=3", {4});
  Rng rng(1);
  expect_error([&] { layer->forward(random_tensor({2, 5}, rng), true); }, "dense: expected input N×4, got 2x5");
  expect_error([&] { layer->forward(random_tensor({2, 4}, rng, DType::f32), true); },
               "dense: input is float32 but the parameters are float64");
}

}  // namespace
}  // namespace dlscale
