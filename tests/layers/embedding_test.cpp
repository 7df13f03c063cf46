// Token and positional embeddings: hand-checked gathers, scatter-add
// gradients (a repeated token sums), finite differences and errors.
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

Tensor ids(const Shape& shape, std::vector<double> values, DType dtype = DType::f64) {
  Tensor t(shape, dtype);
  for (std::size_t i = 0; i < values.size(); ++i) t.set(static_cast<std::int64_t>(i), values[i]);
  return t;
}

TEST(Embedding, GathersRowsAndSumsRepeatedTokens) {
  auto layer = build_layer("embedding vocab=5 dim=3", {4});
  EXPECT_EQ(layer->output_shape(), Shape({4, 3}));
  Param* w = layer->params()[0];
  ASSERT_EQ(w->value.shape(), Shape({5, 3}));
  Tensor x = ids({2, 4}, {0, 4, 4, 2, 1, 1, 3, 0});
  Tensor y = layer->forward(x, true);
  ASSERT_EQ(y.shape(), Shape({2, 4, 3}));
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(y.at(r * 3 + c), w->value.at(static_cast<int>(x.at(r)) * 3 + c)) << r;
  Tensor dy({2, 4, 3}, DType::f64);
  for (int i = 0; i < 24; ++i) dy.set(i, i);
  Tensor dx = layer->backward(dy);
  // Token 4 appears at rows 1 and 2: its gradient is the sum of both rows.
  for (int c = 0; c < 3; ++c) EXPECT_EQ(w->grad.at(4 * 3 + c), (3 + c) + (6 + c));
  for (int c = 0; c < 3; ++c) EXPECT_EQ(w->grad.at(1 * 3 + c), (12 + c) + (15 + c));
  for (int c = 0; c < 3; ++c) EXPECT_EQ(w->grad.at(0 * 3 + c), c + (21 + c));
  ASSERT_EQ(dx.shape(), x.shape());  // token ids have no gradient: zeros
  for (int i = 0; i < 8; ++i) EXPECT_EQ(dx.at(i), 0.0);
}

TEST(Embedding, FiniteDifferences) {
  auto layer = build_layer("embedding vocab=7 dim=4", {5});
  Rng rng(4);
  Tensor x({3, 5}, DType::f64);
  for (int i = 0; i < 15; ++i) x.set(i, static_cast<double>(rng.below(7)));
  check_gradients(*layer, x);
}

TEST(Embedding, Float32IdsAndErrors) {
  auto layer = build_layer("embedding vocab=256 dim=2", {3}, DType::f32);
  Tensor y = layer->forward(ids({1, 3}, {255, 0, 97}, DType::f32), false);
  EXPECT_EQ(y.dtype(), DType::f32);
  EXPECT_EQ(y.at(0), layer->params()[0]->value.at(255 * 2));
  expect_error([&] { layer->forward(ids({1, 3}, {1, 256, 0}, DType::f32), false); },
               "token id 256.000000 of sample 0 at position 1 is outside [0, 256)");
  expect_error([&] { layer->forward(ids({1, 3}, {-1, 2, 0}, DType::f32), false); }, "outside [0, 256)");
  expect_error([&] { layer->forward(Tensor({1, 4}, DType::f32), false); }, "expects N x 3 token ids");
  expect_error([] { build_layer("embedding vocab=5 dim=3", {4, 2}); }, "needs a sample of T token ids");
  expect_error([] { build_layer("embedding vocab=0 dim=3", {4}); }, "vocab and dim must be at least 1");
  expect_error([] { build_layer("embedding dim=3", {4}); }, "missing attribute 'vocab'");
}

TEST(PosEmbedding, AddsOneLearnedVectorPerPosition) {
  auto layer = build_layer("posembedding", {3, 2});
  Param* p = layer->params()[0];
  ASSERT_EQ(p->value.shape(), Shape({3, 2}));
  Rng rng(2);
  Tensor x = random_tensor({2, 3, 2}, rng);
  Tensor y = layer->forward(x, true);
  for (int i = 0; i < 12; ++i) EXPECT_DOUBLE_EQ(y.at(i), x.at(i) + p->value.at(i % 6)) << i;
  check_gradients(*layer, x);
  expect_error([] { build_layer("posembedding", {6}); }, "needs a sequence input T×C");
  expect_error([&] { layer->forward(Tensor({2, 4, 2}, DType::f64), true); }, "expects N x 3x2");
}

}  // namespace
}  // namespace dlscale
