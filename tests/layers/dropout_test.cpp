// Dropout: kept fraction and scaling, identity at inference, mask
// reproducibility, finite differences with a frozen mask, float32.
#include <gtest/gtest.h>

#include <string>

#include "layer_factory.h"
#include "layers/dropout.h"
#include "layers/gradient_check.h"
#include "layers/registry.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::check_gradients;
using testing::random_tensor;

Tensor ones(const Shape& shape, DType dtype) {
  Tensor t(shape, dtype);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, 1.0);
  return t;
}

TEST(Dropout, KeepsAboutOneMinusRateAndScalesKeptUnits) {
  for (DType dtype : {DType::f64, DType::f32}) {
    for (double rate : {0.25, 0.5, 0.9}) {
      SCOPED_TRACE(to_string(dtype) + " rate " + std::to_string(rate));
      auto layer = build_layer("dropout rate=" + std::to_string(rate), {100, 10}, dtype);
      Tensor x = ones({20, 100, 10}, dtype);
      Tensor y = layer->forward(x, true);
      EXPECT_EQ(y.dtype(), dtype);
      std::int64_t kept = 0;
      const double scale = 1.0 / (1.0 - rate);
      for (std::int64_t i = 0; i < y.numel(); ++i) {
        if (y.at(i) != 0) {
          ++kept;
          ASSERT_NEAR(y.at(i), scale, scale * 1e-7);
        }
      }
      // 20000 Bernoulli draws: the standard deviation of the fraction is < 0.0036.
      EXPECT_NEAR(static_cast<double>(kept) / y.numel(), 1 - rate, 0.02);
      // The gradient goes through the same mask.
      Tensor dx = layer->backward(ones(y.shape(), dtype));
      for (std::int64_t i = 0; i < y.numel(); ++i) ASSERT_EQ(dx.at(i), y.at(i));
    }
  }
}

TEST(Dropout, HandChecked) {
  // rate 0.5: every output is 0 or 2x, and the mean is kept in expectation.
  auto layer = build_layer("dropout", {4});
  Tensor x({1, 4}, DType::f64);
  for (int i = 0; i < 4; ++i) x.set(i, i + 1.0);
  Tensor y = layer->forward(x, true);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(y.at(i) == 0 || y.at(i) == 2 * (i + 1.0)) << y.at(i);
}

TEST(Dropout, InferenceIsIdentity) {
  Rng rng(2);
  auto layer = build_layer("dropout rate=0.7", {3, 4});
  Tensor x = random_tensor({5, 3, 4}, rng);
  Tensor y = layer->forward(x, false);
  Tensor dy = random_tensor(y.shape(), rng);
  Tensor dx = layer->backward(dy);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    ASSERT_EQ(y.at(i), x.at(i));
    ASSERT_EQ(dx.at(i), dy.at(i));
  }
  auto zero_rate = build_layer("dropout rate=0", {3, 4});
  Tensor yz = zero_rate->forward(x, true);
  for (std::int64_t i = 0; i < x.numel(); ++i) ASSERT_EQ(yz.at(i), x.at(i));
}

TEST(Dropout, FreshMaskPerForwardUnlessFrozen) {
  auto layer = build_layer("dropout", {1000});
  Tensor x = ones({2, 1000}, DType::f64);
  Tensor a = layer->forward(x, true);
  Tensor b = layer->forward(x, true);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) differ += a.at(i) != b.at(i);
  EXPECT_GT(differ, 500);

  auto& dropout = dynamic_cast<Dropout&>(*layer);
  dropout.freeze_mask(true);
  Tensor c = layer->forward(x, true);
  Tensor d = layer->forward(x, true);
  for (std::int64_t i = 0; i < c.numel(); ++i) ASSERT_EQ(c.at(i), d.at(i));
  EXPECT_DOUBLE_EQ(dropout.rate(), 0.5);
}

TEST(Dropout, SameSeedSameMasks) {
  Tensor x = ones({4, 64}, DType::f64);
  Tensor a = build_layer("dropout", {64}, DType::f64, 11)->forward(x, true);
  Tensor b = build_layer("dropout", {64}, DType::f64, 11)->forward(x, true);
  Tensor c = build_layer("dropout", {64}, DType::f64, 12)->forward(x, true);
  std::int64_t differ = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    ASSERT_EQ(a.at(i), b.at(i));
    differ += a.at(i) != c.at(i);
  }
  EXPECT_GT(differ, 0);
}

TEST(Dropout, FiniteDifferences) {
  Rng rng(3);
  auto layer = build_layer("dropout rate=0.3", {2, 3, 3});
  dynamic_cast<Dropout&>(*layer).freeze_mask(true);
  Tensor x = random_tensor({3, 2, 3, 3}, rng);
  check_gradients(*layer, x, true);
  check_gradients(*layer, x, false);
}

TEST(Dropout, Errors) {
  try {
    build_layer("dropout rate=1.5", {3});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rate must be in [0, 1), got 1.5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(build_layer("dropout rate=1", {3}), Error);
  EXPECT_THROW(build_layer("dropout rate=-0.1", {3}), Error);
  auto layer = build_layer("dropout", {3}, DType::f32);
  EXPECT_THROW(layer->forward(Tensor({2, 3}, DType::f64), true), Error);
  EXPECT_THROW(layer->backward(Tensor({2, 3}, DType::f32)), Error);  // before any forward
}

}  // namespace
}  // namespace dlscale
