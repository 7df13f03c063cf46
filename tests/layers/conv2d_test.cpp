// conv2d: the im2col + GEMM path against a plain-loop reference (forward and
// backward) over many stride/padding combinations, chunked and threaded;
// a hand-checked case; finite differences in float64; float32; spec errors.
#include "layer_factory.h"
#include "expect_error.h"
#include "layers/conv2d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

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

Conv2d& as_conv(Layer& layer) { return dynamic_cast<Conv2d&>(layer); }

// The reference: the definition of the convolution with plain loops, in double.
// x is (N, C, H, W), w is (F, C, K, K), b is (F); returns y (N, F, OH, OW).
Tensor reference_forward(const Tensor& x, const Tensor& w, const Tensor* b, const Conv2dGeometry& g) {
  const std::int64_t N = x.dim(0), C = g.channels, H = g.height, W = g.width, F = g.filters, K = g.kernel;
  const std::int64_t OH = g.out_height(), OW = g.out_width();
  Tensor y({N, F, OH, OW}, DType::f64);
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t f = 0; f < F; ++f)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          double s = b ? b->at(f) : 0.0;
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t kh = 0; kh < K; ++kh)
              for (std::int64_t kw = 0; kw < K; ++kw) {
                const std::int64_t ih = oh * g.stride - g.pad_top + kh, iw = ow * g.stride - g.pad_left + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                s += x.at(((n * C + c) * H + ih) * W + iw) * w.at(((f * C + c) * K + kh) * K + kw);
              }
          y.set(((n * F + f) * OH + oh) * OW + ow, s);
        }
  return y;
}

struct Grads {
  Tensor dx, dw, db;
};

// The adjoint of reference_forward, same loops: every product x·w sends dy to both factors.
Grads reference_backward(const Tensor& x, const Tensor& w, const Tensor& dy, const Conv2dGeometry& g) {
  const std::int64_t N = x.dim(0), C = g.channels, H = g.height, W = g.width, F = g.filters, K = g.kernel;
  const std::int64_t OH = g.out_height(), OW = g.out_width();
  Grads r{Tensor(x.shape(), DType::f64), Tensor(w.shape(), DType::f64), Tensor({F}, DType::f64)};
  for (std::int64_t n = 0; n < N; ++n)
    for (std::int64_t f = 0; f < F; ++f)
      for (std::int64_t oh = 0; oh < OH; ++oh)
        for (std::int64_t ow = 0; ow < OW; ++ow) {
          const double d = dy.at(((n * F + f) * OH + oh) * OW + ow);
          r.db.set(f, r.db.at(f) + d);
          for (std::int64_t c = 0; c < C; ++c)
            for (std::int64_t kh = 0; kh < K; ++kh)
              for (std::int64_t kw = 0; kw < K; ++kw) {
                const std::int64_t ih = oh * g.stride - g.pad_top + kh, iw = ow * g.stride - g.pad_left + kw;
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                const std::int64_t xi = ((n * C + c) * H + ih) * W + iw, wi = ((f * C + c) * K + kh) * K + kw;
                r.dx.set(xi, r.dx.at(xi) + d * w.at(wi));
                r.dw.set(wi, r.dw.at(wi) + d * x.at(xi));
              }
        }
  return r;
}

// Runs forward and backward of `layer` on random data and compares all four results with the reference.
void expect_matches_reference(Layer& layer, const Shape& input, std::int64_t batch, double tol, std::uint64_t seed) {
  const Conv2dGeometry& g = as_conv(layer).geometry();
  const DType dtype = layer.params()[0]->value.dtype();
  Rng rng(seed);
  layer.params()[1]->value.copy_from(random_tensor({g.filters}, rng, dtype));
  Shape xs{batch};
  xs.insert(xs.end(), input.begin(), input.end());
  Tensor x = random_tensor(xs, rng, dtype);
  Tensor y = layer.forward(x, true);
  Tensor w64 = layer.params()[0]->value.to(DType::f64), b64 = layer.params()[1]->value.to(DType::f64);
  expect_close(y.to(DType::f64), reference_forward(x.to(DType::f64), w64, &b64, g), tol, "y");

  Tensor dy = random_tensor(y.shape(), rng, dtype);
  Tensor dx = layer.backward(dy);
  Grads ref = reference_backward(x.to(DType::f64), w64, dy.to(DType::f64), g);
  expect_close(dx.to(DType::f64), ref.dx, tol, "dx");
  expect_close(layer.params()[0]->grad.to(DType::f64), ref.dw, tol, "dW");
  expect_close(layer.params()[1]->grad.to(DType::f64), ref.db, tol, "db");
}

struct Case {
  std::string attrs;
  Shape input;
};

// Stride/padding combinations: odd and even kernels, symmetric and
// asymmetric ("same" with an even kernel or stride 2) padding, 1×1 kernels,
// strides that leave a partial window, non-square inputs.
const std::vector<Case> kCases = {
    {"filters=3 kernel=3", {2, 7, 7}},
    {"filters=3 kernel=3 padding=1", {2, 7, 7}},
    {"filters=4 kernel=3 stride=2 padding=1", {3, 8, 6}},
    {"filters=2 kernel=5 stride=3 padding=2", {1, 9, 9}},
    {"filters=3 kernel=2 padding=same", {2, 6, 6}},
    {"filters=3 kernel=3 stride=2 padding=same", {2, 7, 5}},
    {"filters=3 kernel=4 stride=2 padding=same", {2, 5, 5}},
    {"filters=2 kernel=1", {3, 5, 4}},
    {"filters=2 kernel=1 stride=2", {3, 5, 5}},
    {"filters=2 kernel=3 padding=3", {2, 3, 3}},
    {"filters=5 kernel=3 stride=1 padding=1 bias=true", {4, 4, 9}},
};

TEST(Conv2d, HandCheckedValidAndPadded) {
  // x is the 3x3 image 1..9, the kernel is all ones: each output is a window sum.
  Tensor x({1, 1, 3, 3}, DType::f64);
  for (int i = 0; i < 9; ++i) x.set(i, i + 1);

  auto valid = build_layer("conv2d filters=1 kernel=2", {1, 3, 3});
  for (int i = 0; i < 4; ++i) valid->params()[0]->value.set(i, 1.0);
  valid->params()[1]->value.set(0, 0.5);
  Tensor y = valid->forward(x, true);
  ASSERT_EQ(y.shape(), Shape({1, 1, 2, 2}));
  const double expect_valid[] = {12.5, 16.5, 24.5, 28.5};
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(y.at(i), expect_valid[i]) << i;
  // dy all ones: each input pixel gets the number of windows covering it.
  Tensor ones({1, 1, 2, 2}, DType::f64);
  for (int i = 0; i < 4; ++i) ones.set(i, 1.0);
  Tensor dx = valid->backward(ones);
  const double expect_dx[] = {1, 2, 1, 2, 4, 2, 1, 2, 1};
  for (int i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(dx.at(i), expect_dx[i]) << i;
  const double expect_dw[] = {12, 16, 24, 28};  // dW[kh][kw] = sum of the window at offset (kh, kw)
  for (int i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(valid->params()[0]->grad.at(i), expect_dw[i]) << i;
  EXPECT_DOUBLE_EQ(valid->params()[1]->grad.at(0), 4.0);

  auto padded = build_layer("conv2d filters=1 kernel=3 padding=1 bias=false", {1, 3, 3});
  for (int i = 0; i < 9; ++i) padded->params()[0]->value.set(i, 1.0);
  y = padded->forward(x, true);
  ASSERT_EQ(y.shape(), Shape({1, 1, 3, 3}));
  const double expect_padded[] = {12, 21, 16, 27, 45, 33, 24, 39, 28};
  for (int i = 0; i < 9; ++i) EXPECT_DOUBLE_EQ(y.at(i), expect_padded[i]) << i;
}

TEST(Conv2d, MatchesReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.attrs + " on " + to_string(c.input));
    auto layer = build_layer("conv2d " + c.attrs, c.input);
    expect_matches_reference(*layer, c.input, 3, 1e-12, 11);
  }
}

TEST(Conv2d, ChunkedBatchMatchesReference) {
  // A scratch limit below one sample's columns forces one chunk per sample;
  // slightly above two samples gives chunks of 2, 2 and 1.
  for (std::size_t limit : {std::size_t(1), std::size_t(0)}) {
    for (const Case& c : kCases) {
      SCOPED_TRACE(c.attrs + " limit " + std::to_string(limit));
      auto layer = build_layer("conv2d " + c.attrs, c.input);
      const Conv2dGeometry& g = as_conv(*layer).geometry();
      const std::size_t per_sample = g.channels * g.kernel * g.kernel * g.out_height() * g.out_width() * 8;
      as_conv(*layer).set_max_scratch_bytes(limit ? limit : 2 * per_sample + 7);
      expect_matches_reference(*layer, c.input, 5, 1e-12, 12);
    }
  }
}

TEST(Conv2d, ThreadedMatchesReference) {
  const int before = cpu_threads();
  set_cpu_threads(4);  // more threads than cores is fine: this is about races, not speed
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.attrs);
    auto layer = build_layer("conv2d " + c.attrs, c.input);
    expect_matches_reference(*layer, c.input, 6, 1e-12, 13);
  }
  set_cpu_threads(before);
}

TEST(Conv2d, Float32MatchesReference) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.attrs);
    auto layer = build_layer("conv2d " + c.attrs, c.input, DType::f32);
    EXPECT_EQ(layer->params()[0]->value.dtype(), DType::f32);
    expect_matches_reference(*layer, c.input, 3, 1e-5, 14);
  }
}

// 16-channel blocks with a 3×3 stride-1 kernel take oneDNN's Winograd path
// in float32 builds with oneDNN: it must agree with the reference too.
TEST(Conv2d, Float32WinogradShapesMatchReference) {
  for (const char* attrs : {"filters=16 kernel=3 padding=same", "filters=32 kernel=3 padding=1"}) {
    SCOPED_TRACE(attrs);
    auto layer = build_layer(std::string("conv2d ") + attrs, {16, 9, 9}, DType::f32);
    expect_matches_reference(*layer, {16, 9, 9}, 4, 1e-4, 15);
  }
}

// ResNet-20's downsampling convolutions at the channel counts the example
// uses (oneDNN's blocked kernels in float32 builds with oneDNN): the 3×3
// stride-2 main path and the 1×1 stride-2 projection, on even and odd planes.
TEST(Conv2d, Float32ResNetDownsamplingMatchesReference) {
  for (const Shape& in : {Shape{16, 8, 8}, Shape{16, 7, 7}}) {
    for (const char* attrs : {"filters=32 kernel=3 stride=2 padding=same bias=true",
                              "filters=32 kernel=1 stride=2 bias=true", "filters=16 kernel=1 bias=true"}) {
      SCOPED_TRACE(std::string(attrs) + " on " + to_string(in));
      auto layer = build_layer(std::string("conv2d ") + attrs, in, DType::f32);
      expect_matches_reference(*layer, in, 3, 1e-4, 16);
    }
  }
}

TEST(Conv2d, Gradients) {
  const std::vector<Case> cases = {
      {"filters=2 kernel=3 padding=1", {2, 4, 4}},
      {"filters=2 kernel=3 stride=2 padding=same", {2, 5, 4}},
      {"filters=3 kernel=2 stride=1 padding=same bias=false", {1, 4, 3}},
      // ResNet's downsampling: 3×3 stride 2 on an even input, and the 1×1
      // stride-2 projection shortcut (odd and even inputs).
      {"filters=3 kernel=3 stride=2 padding=same bias=false", {2, 6, 6}},
      {"filters=3 kernel=1 stride=2 bias=false", {2, 6, 6}},
      {"filters=2 kernel=1 stride=2", {3, 5, 4}},
      {"filters=2 kernel=1", {3, 3, 4}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.attrs);
    auto layer = build_layer("conv2d " + c.attrs, c.input);
    Rng rng(21);
    if (layer->params().size() > 1) layer->params()[1]->value.copy_from(random_tensor({layer->output_shape()[0]}, rng));
    Shape xs{2};
    xs.insert(xs.end(), c.input.begin(), c.input.end());
    check_gradients(*layer, random_tensor(xs, rng));
  }
}

// The first layer of a network skips dL/dx; its parameter gradients must not change.
TEST(Conv2d, SkippingTheInputGradientKeepsParamGradients) {
  for (const char* line : {"conv2d filters=3 kernel=3 padding=same", "dense units=5"}) {
    SCOPED_TRACE(line);
    auto full = build_layer(line, {2, 4, 4}), first = build_layer(line, {2, 4, 4});
    first->set_input_grad_needed(false);
    Rng rng(4);
    Tensor x = random_tensor({3, 2, 4, 4}, rng);
    Tensor dy = random_tensor(full->forward(x, true).shape(), rng);
    first->forward(x, true);
    EXPECT_FALSE(full->backward(dy).empty());
    EXPECT_TRUE(first->backward(dy).empty());
    for (std::size_t i = 0; i < full->params().size(); ++i)
      expect_close(first->params()[i]->grad, full->params()[i]->grad, 0.0, full->params()[i]->name);
  }
}

TEST(Conv2d, OutputShapesAndParams) {
  auto same = build_layer("conv2d filters=8 kernel=3 stride=2 padding=same", {3, 7, 5});
  EXPECT_EQ(same->output_shape(), Shape({8, 4, 3}));  // ceil(7/2), ceil(5/2)
  auto even = build_layer("conv2d filters=1 kernel=4 padding=same", {1, 6, 6});
  EXPECT_EQ(even->output_shape(), Shape({1, 6, 6}));
  const Conv2dGeometry& g = as_conv(*even).geometry();
  EXPECT_EQ(g.pad_top, 1);  // total padding 3: one on top, the odd one at the bottom
  EXPECT_EQ(g.pad_bottom, 2);
  auto valid = build_layer("conv2d filters=6 kernel=5", {1, 28, 28});
  EXPECT_EQ(valid->output_shape(), Shape({6, 24, 24}));
  ASSERT_EQ(valid->params().size(), 2u);
  EXPECT_EQ(valid->params()[0]->value.shape(), Shape({6, 1, 5, 5}));
  EXPECT_EQ(valid->params()[0]->grad.shape(), Shape({6, 1, 5, 5}));
  EXPECT_EQ(valid->params()[1]->value.shape(), Shape({6}));
  EXPECT_FALSE(valid->params()[1]->regularize);
  EXPECT_EQ(build_layer("conv2d filters=6 kernel=5 bias=false", {1, 28, 28})->params().size(), 1u);
}

TEST(Conv2d, HeNormalInitialization) {
  auto layer = build_layer("conv2d filters=64 kernel=3", {32, 8, 8});
  const Tensor& w = layer->params()[0]->value;
  double sq = 0;
  for (std::int64_t i = 0; i < w.numel(); ++i) sq += w.at(i) * w.at(i);
  EXPECT_NEAR(std::sqrt(sq / static_cast<double>(w.numel())), std::sqrt(2.0 / (32 * 9)), 0.002);
}

TEST(Conv2d, SpecErrors) {
  expect_error([] { build_layer("conv2d filters=4 kernel=3", {784}); }, "conv2d: needs a C×H×W input, got 784");
  expect_error([] { build_layer("conv2d filters=4 kernel=5", {1, 3, 3}); }, "kernel 5 larger than padded input 3x3");
  expect_error([] { build_layer("conv2d filters=4 kernel=5 padding=1", {1, 2, 8}); }, "kernel 5 larger than padded input 4x10");
  expect_error([] { build_layer("conv2d kernel=3", {1, 8, 8}); }, "missing attribute 'filters'");
  expect_error([] { build_layer("conv2d filters=0 kernel=3", {1, 8, 8}); }, "filters=0 must be at least 1");
  expect_error([] { build_layer("conv2d filters=2 kernel=3 stride=0", {1, 8, 8}); }, "stride=0 must be at least 1");
  expect_error([] { build_layer("conv2d filters=2 kernel=3 padding=valid", {1, 8, 8}); },
               "padding=valid must be a non-negative integer or 'same'");
  expect_error([] { build_layer("conv2d filters=2 kernel=3 padding=-1", {1, 8, 8}); }, "padding=-1 must be");
  expect_error([] { build_layer("conv2d filters=2 kernel=3 strides=2", {1, 8, 8}); }, "unknown attribute 'strides'");
}

TEST(Conv2d, ForwardErrors) {
  auto layer = build_layer("conv2d filters=2 kernel=3", {1, 5, 5});
  Rng rng(1);
  expect_error([&] { layer->forward(random_tensor({2, 1, 5, 6}, rng), true); },
               "conv2d: expected input N×1x5x5, got 2x1x5x6");
  expect_error([&] { layer->forward(random_tensor({2, 1, 5, 5}, rng, DType::f32), true); },
               "conv2d: input is float32 but the parameters are float64");
}

}  // namespace
}  // namespace dlscale
