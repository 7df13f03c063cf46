// Multi-head self-attention: the forward against a plain-loop reference,
// the causal mask (no output depends on later positions), finite
// differences with and without the mask, float32, and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "expect_error.h"
#include "layer_factory.h"
#include "layers/gradient_check.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::check_gradients;
using testing::expect_close;
using testing::expect_error;
using testing::random_tensor;

// The header's formulas with loops, in double: x (N, T, C), params in the
// layer's order (qkv_weight, qkv_bias, out_weight, out_bias).
Tensor reference(const Tensor& x, const std::vector<Param*>& p, int heads, bool causal) {
  const std::int64_t n = x.dim(0), t = x.dim(1), c = x.dim(2), d = c / heads;
  auto w = [&](int i, std::int64_t r, std::int64_t k) { return p[i]->value.at(r * c + k); };
  std::vector<double> qkv(n * t * 3 * c), o(n * t * c);
  for (std::int64_t r = 0; r < n * t; ++r)
    for (std::int64_t j = 0; j < 3 * c; ++j) {
      double s = p[1]->value.at(j);
      for (std::int64_t k = 0; k < c; ++k) s += x.at(r * c + k) * w(0, j, k);
      qkv[r * 3 * c + j] = s;
    }
  for (std::int64_t s = 0; s < n; ++s)
    for (int h = 0; h < heads; ++h)
      for (std::int64_t i = 0; i < t; ++i) {
        auto at = [&](std::int64_t pos, std::int64_t part, std::int64_t e) {
          return qkv[(s * t + pos) * 3 * c + part * c + h * d + e];
        };
        std::vector<double> score(t, 0.0);
        double top = -1e300, sum = 0;
        const std::int64_t keys = causal ? i + 1 : t;
        for (std::int64_t j = 0; j < keys; ++j) {
          for (std::int64_t e = 0; e < d; ++e) score[j] += at(i, 0, e) * at(j, 1, e);
          score[j] /= std::sqrt(static_cast<double>(d));
          top = std::max(top, score[j]);
        }
        for (std::int64_t j = 0; j < keys; ++j) sum += score[j] = std::exp(score[j] - top);
        for (std::int64_t e = 0; e < d; ++e) {
          double v = 0;
          for (std::int64_t j = 0; j < keys; ++j) v += score[j] / sum * at(j, 2, e);
          o[(s * t + i) * c + h * d + e] = v;
        }
      }
  Tensor y(x.shape(), DType::f64);
  for (std::int64_t r = 0; r < n * t; ++r)
    for (std::int64_t j = 0; j < c; ++j) {
      double s = p[3]->value.at(j);
      for (std::int64_t k = 0; k < c; ++k) s += o[r * c + k] * w(2, j, k);
      y.set(r * c + j, s);
    }
  return y;
}

void randomize(Layer& layer, Rng& rng) {
  for (Param* p : layer.params())
    for (std::int64_t i = 0; i < p->value.numel(); ++i) p->value.set(i, rng.normal(0.0, 0.5));
}

TEST(Attention, MatchesReference) {
  for (bool causal : {false, true})
    for (int heads : {1, 2, 4}) {
      SCOPED_TRACE("heads " + std::to_string(heads) + (causal ? " causal" : ""));
      auto layer = build_layer("attention heads=" + std::to_string(heads) + " causal=" + (causal ? "true" : "false"),
                               {5, 8});
      ASSERT_EQ(layer->params().size(), 4u);
      EXPECT_EQ(layer->params()[0]->value.shape(), Shape({24, 8}));
      Rng rng(heads);
      randomize(*layer, rng);
      Tensor x = random_tensor({2, 5, 8}, rng);
      expect_close(layer->forward(x, true), reference(x, layer->params(), heads, causal), 1e-12, "forward");
    }
}

TEST(Attention, CausalOutputsIgnoreLaterPositions) {
  auto layer = build_layer("attention heads=2 causal=true", {6, 4});
  Rng rng(8);
  randomize(*layer, rng);
  Tensor x = random_tensor({1, 6, 4}, rng);
  Tensor before = layer->forward(x, false);
  for (int k = 0; k < 4; ++k) x.set(4 * 4 + k, 9.0);  // change position 4
  Tensor after = layer->forward(x, false);
  for (int i = 0; i < 4 * 4; ++i) EXPECT_EQ(before.at(i), after.at(i)) << i;  // positions 0-3 unchanged
  bool changed = false;
  for (int i = 4 * 4; i < 24; ++i) changed |= before.at(i) != after.at(i);
  EXPECT_TRUE(changed);
}

TEST(Attention, FiniteDifferences) {
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    auto layer = build_layer(std::string("attention heads=2 causal=") + (causal ? "true" : "false"), {4, 6});
    Rng rng(3);
    randomize(*layer, rng);
    check_gradients(*layer, random_tensor({2, 4, 6}, rng), true, 1e-6, 1e-6);
  }
}

TEST(Attention, Float32MatchesFloat64) {
  auto f64 = build_layer("attention heads=4 causal=true", {16, 32}, DType::f64, 9);
  auto f32 = build_layer("attention heads=4 causal=true", {16, 32}, DType::f32, 9);
  Rng rng(1);
  Tensor x = random_tensor({3, 16, 32}, rng);
  Tensor y32 = f32->forward(x.to(DType::f32), true);
  EXPECT_EQ(y32.dtype(), DType::f32);
  expect_close(y32.to(DType::f64), f64->forward(x, true), 1e-4, "float32 forward");
}

TEST(Attention, Errors) {
  expect_error([] { build_layer("attention heads=3", {4, 8}); }, "heads=3 must be at least 1 and divide the width 8");
  expect_error([] { build_layer("attention heads=2", {8}); }, "needs a sequence input T×C");
  expect_error([] { build_layer("attention", {4, 8}); }, "missing attribute 'heads'");
  expect_error([] { build_layer("attention heads=2 mask=causal", {4, 8}); }, "unknown attribute 'mask'");
  auto layer = build_layer("attention heads=2", {4, 8});
  expect_error([&] { layer->backward(Tensor({1, 4, 8}, DType::f64)); }, "backward called without a forward");
  expect_error([&] { layer->forward(Tensor({1, 8, 4}, DType::f64), true); }, "expects N x 4x8");
}

}  // namespace
}  // namespace dlscale
