// Activation layers: hand-checked values, finite-difference gradients in
// float64, float32 against float64, and the factories' checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "layer_factory.h"
#include "layers/activations.h"
#include "layers/fast_math.h"
#include "layers/gradient_check.h"
#include "layers/registry.h"

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

void expect_values(const Tensor& t, std::initializer_list<double> want, double tol, const std::string& what) {
  ASSERT_EQ(t.numel(), static_cast<std::int64_t>(want.size())) << what;
  std::int64_t i = 0;
  for (double w : want) {
    EXPECT_NEAR(t.at(i), w, tol) << what << " element " << i;
    ++i;
  }
}

const char* const kKinds[] = {"relu", "leakyrelu alpha=0.1", "gelu", "tanh", "sigmoid"};

TEST(Activations, HandChecked) {
  Tensor x = values({1, 4}, {-2, -0.5, 0.5, 3});
  Tensor ones = values({1, 4}, {1, 1, 1, 1});
  auto relu = build_layer("relu", {4});
  expect_values(relu->forward(x, true), {0, 0, 0.5, 3}, 0, "relu");
  expect_values(relu->backward(ones), {0, 0, 1, 1}, 0, "relu'");

  auto leaky = build_layer("leakyrelu alpha=0.1", {4});
  expect_values(leaky->forward(x, true), {-0.2, -0.05, 0.5, 3}, 1e-15, "leakyrelu");
  expect_values(leaky->backward(ones), {0.1, 0.1, 1, 1}, 1e-15, "leakyrelu'");
  auto leaky_default = build_layer("leakyrelu", {4});
  expect_values(leaky_default->forward(x, true), {-0.02, -0.005, 0.5, 3}, 1e-15, "leakyrelu default alpha");

  // gelu(x) = x Φ(x): Φ(1) = 0.8413447460685429.
  Tensor g = values({1, 3}, {-1, 0, 1});
  auto gelu = build_layer("gelu", {3});
  expect_values(gelu->forward(g, true), {-0.15865525393145707, 0, 0.8413447460685429}, 1e-14, "gelu");
  // gelu'(x) = Φ(x) + x φ(x), φ(1) = 0.24197072451914337.
  expect_values(gelu->backward(values({1, 3}, {1, 1, 1})),
                {0.15865525393145707 - 0.24197072451914337, 0.5, 1.0833154705876863}, 1e-14, "gelu'");

  auto tanh = build_layer("tanh", {3});
  expect_values(tanh->forward(g, true), {-0.7615941559557649, 0, 0.7615941559557649}, 1e-15, "tanh");
  expect_values(tanh->backward(values({1, 3}, {1, 1, 2})), {0.41997434161402614, 1, 2 * 0.41997434161402614},
                1e-15, "tanh'");

  auto sigmoid = build_layer("sigmoid", {4});
  Tensor s = values({1, 4}, {-1000, 0, 2, 1000});
  expect_values(sigmoid->forward(s, true), {0, 0.5, 0.8807970779778823, 1}, 1e-15, "sigmoid, no overflow");
  expect_values(sigmoid->backward(values({1, 4}, {1, 1, 1, 1})), {0, 0.25, 0.10499358540350662, 0}, 1e-15,
                "sigmoid'");
}

TEST(Activations, FiniteDifferences) {
  for (const char* kind : kKinds) {
    SCOPED_TRACE(kind);
    Rng rng(3);
    Tensor x = random_tensor({3, 2, 4, 5}, rng);
    // Keep every input at least 0.1 away from the relu kink so a step of
    // h never crosses it.
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, (x.at(i) < 0 ? -0.1 : 0.1) + x.at(i));
    auto layer = build_layer(kind, {2, 4, 5});
    EXPECT_EQ(layer->output_shape(), (Shape{2, 4, 5}));
    check_gradients(*layer, x);
  }
}

TEST(Activations, Float32MatchesFloat64) {
  for (const char* kind : kKinds) {
    SCOPED_TRACE(kind);
    Rng rng(5);
    Tensor x64 = random_tensor({8, 33}, rng, DType::f64, 2.0);
    Tensor dy64 = random_tensor({8, 33}, rng);
    Tensor x32 = x64.to(DType::f32), dy32 = dy64.to(DType::f32);
    auto l64 = build_layer(kind, {33}, DType::f64);
    auto l32 = build_layer(kind, {33}, DType::f32);
    Tensor y32 = l32->forward(x32, true);
    Tensor dx32 = l32->backward(dy32);
    EXPECT_EQ(y32.dtype(), DType::f32);
    EXPECT_EQ(dx32.dtype(), DType::f32);
    testing::expect_close(y32.to(DType::f64), l64->forward(x64, true), 1e-6, "y");
    testing::expect_close(dx32.to(DType::f64), l64->backward(dy64), 1e-6, "dx");
  }
}

TEST(Activations, LargeInputRunsInParallel) {
  // Above the parallel threshold; the result must equal the serial formula.
  Rng rng(9);
  Tensor x = random_tensor({4, 50000}, rng, DType::f32);
  auto relu = build_layer("relu", {50000}, DType::f32);
  Tensor y = relu->forward(x, true);
  for (std::int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(y.at(i), std::max(0.0, x.at(i)));
}

// layers/fast_math.h against libm in double, over every float step of 1e-4
// (erf) and 1e-3 (exp) of their ranges: the errors its header states.
TEST(Activations, FloatErfAndExpAreWithinTheirStatedErrors) {
  double erf_worst = 0, exp_worst = 0;
  for (double v = -8; v <= 8; v += 1e-4) {
    const float x = static_cast<float>(v);
    erf_worst = std::max(erf_worst, std::abs(erf_float(x) - std::erf(static_cast<double>(x))));
  }
  for (double v = -87; v <= 88; v += 1e-3) {
    const float x = static_cast<float>(v);
    const double want = std::exp(static_cast<double>(x));
    exp_worst = std::max(exp_worst, std::abs(exp_float(x) - want) / want);
  }
  EXPECT_LT(erf_worst, 4.5e-7);
  EXPECT_LT(exp_worst, 1.2e-7);
  EXPECT_EQ(erf_float(0.0f), 0.0f);
  EXPECT_EQ(erf_float(9.0f), 1.0f);
  EXPECT_EQ(erf_float(-9.0f), -1.0f);
  EXPECT_EQ(exp_float(0.0f), 1.0f);
}

// The float32 GELU loops are vectorized and split over threads; every
// element still equals the scalar formula bitwise (deterministic mode
// relies on it: a lane must not round differently from a peeled element).
TEST(Activations, Float32GeluEqualsTheScalarFormulaBitwise) {
  Rng rng(10);
  Tensor x = random_tensor({4, 50001}, rng, DType::f32, 5.0);
  auto gelu = build_layer("gelu", {50001}, DType::f32);
  Tensor y = gelu->forward(x, true);
  Tensor dy = random_tensor({4, 50001}, rng, DType::f32);
  Tensor dx = gelu->backward(dy);
  const float* xp = x.data<float>();
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const float v = xp[i];
    const float cdf = 0.5f * (1.0f + erf_float(v * static_cast<float>(M_SQRT1_2)));
    const float pdf = exp_float(-0.5f * v * v) * static_cast<float>(0.5 * M_2_SQRTPI * M_SQRT1_2);
    ASSERT_EQ(y.data<float>()[i], 0.5f * v * (1.0f + erf_float(v * static_cast<float>(M_SQRT1_2)))) << i;
    ASSERT_EQ(dx.data<float>()[i], dy.data<float>()[i] * (cdf + v * pdf)) << i;
  }
}

TEST(Activations, Errors) {
  auto relu = build_layer("relu", {4}, DType::f64);
  try {
    relu->forward(Tensor({2, 4}, DType::f32), true);
    FAIL() << "expected a dtype error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("relu"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("float32"), std::string::npos) << e.what();
  }
  EXPECT_THROW(relu->forward(Tensor({2, 5}, DType::f64), true), Error);
  EXPECT_THROW(build_layer("leakyrelu alpha=-1", {4}), Error);
  EXPECT_THROW(build_layer("relu alpha=1", {4}), Error);  // unknown attribute
}

}  // namespace
}  // namespace dlscale
