// Softmax layer and fused softmax cross-entropy: hand-checked values,
// stability, finite differences of the layer and of the loss, float32.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "expect_error.h"
#include "layer_factory.h"
#include "layers/gradient_check.h"
#include "layers/registry.h"
#include "layers/softmax.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::check_gradients;
using testing::random_tensor;

Tensor values(Shape shape, std::initializer_list<double> v, DType dtype = DType::f64) {
  Tensor t(std::move(shape), dtype);
  std::int64_t i = 0;
  for (double x : v) t.set(i++, x);
  return t;
}

TEST(Softmax, HandChecked) {
  for (DType dtype : {DType::f64, DType::f32}) {
    SCOPED_TRACE(to_string(dtype));
    const double tol = dtype == DType::f64 ? 1e-15 : 1e-7;
    // exp of (0, log 2, log 3) is (1, 2, 3): probabilities 1/6, 2/6, 3/6.
    // The second row is shifted by 1000: subtracting the max keeps it finite.
    Tensor z = values({2, 3}, {0, std::log(2.0), std::log(3.0), 1000, 1000, 1000}, dtype);
    Tensor p = softmax(z);
    EXPECT_EQ(p.dtype(), dtype);
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(p.at(j), (j + 1) / 6.0, tol);
      EXPECT_NEAR(p.at(3 + j), 1 / 3.0, tol);
    }
    auto layer = build_layer("softmax", {3}, dtype);
    Tensor y = layer->forward(z, true);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(y.at(i), p.at(i));
    // dy = e_2 on row 0: dx = p ⊙ (e_2 - p_2) = (-1/12, -2/12, 3/12).
    Tensor dx = layer->backward(values({2, 3}, {0, 0, 1, 1, 1, 1}, dtype));
    EXPECT_NEAR(dx.at(0), -1 / 12.0, tol);
    EXPECT_NEAR(dx.at(1), -2 / 12.0, tol);
    EXPECT_NEAR(dx.at(2), 3 / 12.0, tol);
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(dx.at(3 + j), 0, tol) << "a constant dy has no effect";
  }
}

TEST(Softmax, LayerFiniteDifferences) {
  Rng rng(2);
  auto layer = build_layer("softmax", {7});
  check_gradients(*layer, random_tensor({4, 7}, rng, DType::f64, 2.0));
}

TEST(SoftmaxCrossEntropy, HandChecked) {
  Tensor z = values({1, 3}, {0, std::log(2.0), std::log(3.0)});
  const std::int32_t label[] = {2};
  Tensor dz;
  LossResult r = softmax_cross_entropy(z, label, 4.0, dz);
  EXPECT_NEAR(r.loss_sum, std::log(2.0), 1e-15);  // -log(3/6)
  EXPECT_EQ(r.correct, 1);
  ASSERT_EQ(dz.shape(), z.shape());
  EXPECT_NEAR(dz.at(0), (1 / 6.0) / 4, 1e-16);
  EXPECT_NEAR(dz.at(1), (2 / 6.0) / 4, 1e-16);
  EXPECT_NEAR(dz.at(2), (3 / 6.0 - 1) / 4, 1e-16);
}

TEST(SoftmaxCrossEntropy, UniformLogitsGiveLogK) {
  for (DType dtype : {DType::f64, DType::f32}) {
    Tensor z({4, 10}, dtype);
    for (std::int64_t i = 0; i < z.numel(); ++i) z.set(i, 3.5);
    // All ties: the argmax is the first class, so only label 0 counts.
    const std::int32_t labels[] = {0, 3, 0, 9};
    Tensor dz;
    LossResult r = softmax_cross_entropy(z, labels, 4.0, dz);
    EXPECT_NEAR(r.loss_sum, 4 * std::log(10.0), 1e-12);
    EXPECT_EQ(r.correct, 2);
    LossResult e = softmax_cross_entropy_eval(z, labels);
    EXPECT_EQ(e.loss_sum, r.loss_sum);
    EXPECT_EQ(e.correct, r.correct);
  }
}

TEST(SoftmaxCrossEntropy, ArgmaxTakesFirstMax) {
  Tensor z = values({2, 3}, {1, 1, 0, 0, 2, 2});
  const std::int32_t first[] = {0, 1};
  const std::int32_t second[] = {1, 2};
  EXPECT_EQ(softmax_cross_entropy_eval(z, first).correct, 2);
  EXPECT_EQ(softmax_cross_entropy_eval(z, second).correct, 0);
}

TEST(SoftmaxCrossEntropy, GradientMatchesFiniteDifferences) {
  Rng rng(3);
  const std::int64_t n = 5, k = 6;
  Tensor z = random_tensor({n, k}, rng, DType::f64, 3.0);
  std::vector<std::int32_t> labels(n);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(k));
  // Normalizer 12: as if this rank held 5 of a global batch of 12.
  const double normalizer = 12;
  Tensor dz;
  softmax_cross_entropy(z, labels.data(), normalizer, dz);
  Tensor numeric({n, k}, DType::f64);
  const double h = 1e-6;
  for (std::int64_t i = 0; i < z.numel(); ++i) {
    const double v = z.at(i);
    z.set(i, v + h);
    const double lp = softmax_cross_entropy_eval(z, labels.data()).loss_sum / normalizer;
    z.set(i, v - h);
    const double lm = softmax_cross_entropy_eval(z, labels.data()).loss_sum / normalizer;
    z.set(i, v);
    numeric.set(i, (lp - lm) / (2 * h));
  }
  testing::expect_close(dz, numeric, 1e-8, "dL/dlogits");
}

// Next-token prediction: N×T×K logits with N·T labels are N·T independent
// rows, the same sums as the (N·T)×K matrix; the softmax layer on T×K
// normalizes each position.
TEST(SoftmaxCrossEntropy, PerPositionLogitsAreRows) {
  Rng rng(4);
  Tensor z = random_tensor({2, 3, 5}, rng, DType::f64, 2.0);
  std::vector<std::int32_t> labels = {0, 4, 2, 1, 1, 3};
  Tensor dz, dflat;
  const LossResult seq = softmax_cross_entropy(z, labels.data(), 6.0, dz);
  const LossResult flat = softmax_cross_entropy(z.reshaped({6, 5}), labels.data(), 6.0, dflat);
  EXPECT_EQ(seq.loss_sum, flat.loss_sum);
  EXPECT_EQ(seq.correct, flat.correct);
  ASSERT_EQ(dz.shape(), z.shape());
  for (int i = 0; i < 30; ++i) EXPECT_EQ(dz.at(i), dflat.at(i));
  double manual = 0;
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int j = 0; j < 5; ++j) sum += std::exp(z.at(r * 5 + j));
    manual += std::log(sum) - z.at(r * 5 + labels[r]);
  }
  EXPECT_NEAR(seq.loss_sum, manual, 1e-12);
  auto layer = build_layer("softmax", {3, 5});
  Tensor p = layer->forward(z, false);
  for (int r = 0; r < 6; ++r) {
    double row = 0;
    for (int j = 0; j < 5; ++j) row += p.at(r * 5 + j);
    EXPECT_NEAR(row, 1.0, 1e-12) << r;
  }
  check_gradients(*layer, z);
  std::vector<std::int32_t> short_labels = {0, 5, 0, 0, 0, 0};
  testing::expect_error([&] { softmax_cross_entropy_eval(z, short_labels.data()); }, "label 5 of sample 1");
}

TEST(SoftmaxCrossEntropy, Float32MatchesFloat64AndStaysFinite) {
  Rng rng(4);
  const std::int64_t n = 64, k = 300;  // above the parallel threshold
  Tensor z64 = random_tensor({n, k}, rng, DType::f64, 30.0);
  for (std::int64_t j = 0; j < k; ++j) z64.set(j, 500.0 + j);  // exp would overflow without the max shift
  z64 = z64.to(DType::f32).to(DType::f64);
  std::vector<std::int32_t> labels(n);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(k));
  Tensor d64, d32;
  LossResult r64 = softmax_cross_entropy(z64, labels.data(), n, d64);
  LossResult r32 = softmax_cross_entropy(z64.to(DType::f32), labels.data(), n, d32);
  ASSERT_TRUE(std::isfinite(r32.loss_sum));
  EXPECT_NEAR(r32.loss_sum, r64.loss_sum, 1e-9 * r64.loss_sum);
  EXPECT_EQ(r32.correct, r64.correct);
  EXPECT_EQ(d32.dtype(), DType::f32);
  testing::expect_close(d32.to(DType::f64), d64, 1e-7, "dlogits");
}

TEST(SoftmaxCrossEntropy, Errors) {
  Tensor z({2, 3}, DType::f64);
  Tensor dz;
  const std::int32_t bad[] = {0, 3};
  try {
    softmax_cross_entropy_eval(z, bad);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("label 3 of sample 1"), std::string::npos) << e.what();
  }
  const std::int32_t good[] = {0, 2};
  EXPECT_THROW(softmax_cross_entropy(z, good, 0.0, dz), Error);
  EXPECT_THROW(softmax_cross_entropy_eval(Tensor({2, 3, 1}, DType::f64), good), Error);
  EXPECT_THROW(build_layer("softmax", {3, 4, 4}), Error);
  auto layer = build_layer("softmax", {3}, DType::f32);
  EXPECT_THROW(layer->forward(z, true), Error);  // float64 input to a float32 layer
}

}  // namespace
}  // namespace dlscale
