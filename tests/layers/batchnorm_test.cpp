// Batch normalization: hand-checked statistics, running-statistics updates,
// finite-difference gradients in training and inference mode, float32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <utility>
#include <string>

#include "layer_factory.h"
#include "layers/batchnorm.h"
#include "layers/gradient_check.h"
#include "layers/registry.h"
#include "runtime/core/blas.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::check_gradients;
using testing::random_tensor;

Tensor* buffer(Layer& layer, const std::string& name) {
  for (auto& [n, t] : layer.buffers())
    if (n == name) return t;
  ADD_FAILURE() << "no buffer " << name;
  return nullptr;
}

// Non-trivial scale, offset and running statistics, so that the tests see them.
void randomize_state(Layer& layer, Rng& rng) {
  for (Param* p : layer.params())
    for (std::int64_t i = 0; i < p->value.numel(); ++i) p->value.set(i, rng.normal(0.5, 1.0));
  Tensor* mean = buffer(layer, "running_mean");
  Tensor* var = buffer(layer, "running_var");
  for (std::int64_t i = 0; i < mean->numel(); ++i) {
    mean->set(i, rng.normal());
    var->set(i, 0.5 + rng.uniform());
  }
}

TEST(BatchNorm, ParamsAndBuffersStartAsIdentity) {
  auto bn = build_layer("batchnorm", {3, 2, 2});
  auto params = bn->params();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0]->name, "scale");
  EXPECT_EQ(params[1]->name, "offset");
  for (Param* p : params) {
    EXPECT_FALSE(p->regularize);
    EXPECT_EQ(p->value.shape(), (Shape{3}));
    EXPECT_EQ(p->grad.shape(), (Shape{3}));
  }
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(params[0]->value.at(c), 1.0);
    EXPECT_EQ(params[1]->value.at(c), 0.0);
    EXPECT_EQ(buffer(*bn, "running_mean")->at(c), 0.0);
    EXPECT_EQ(buffer(*bn, "running_var")->at(c), 1.0);
  }
  EXPECT_EQ(bn->output_shape(), (Shape{3, 2, 2}));
}

TEST(BatchNorm, HandCheckedFeatures) {
  // One feature, batch {1, 3}: mean 2, biased var 1, unbiased var 2.
  auto bn = build_layer("batchnorm", {1});
  Tensor x({2, 1}, DType::f64);
  x.set(0, 1);
  x.set(1, 3);
  Tensor y = bn->forward(x, true);
  const double s = 1 / std::sqrt(1 + 1e-5);
  EXPECT_NEAR(y.at(0), -s, 1e-15);
  EXPECT_NEAR(y.at(1), s, 1e-15);
  EXPECT_NEAR(buffer(*bn, "running_mean")->at(0), 0.9 * 0 + 0.1 * 2, 1e-15);
  EXPECT_NEAR(buffer(*bn, "running_var")->at(0), 0.9 * 1 + 0.1 * 2, 1e-15);

  // Inference: (x - 0.2) / sqrt(1.1 + eps) with scale 2, offset 1.
  bn->params()[0]->value.set(0, 2);
  bn->params()[1]->value.set(0, 1);
  Tensor yi = bn->forward(x, false);
  EXPECT_NEAR(yi.at(0), 2 * (1 - 0.2) / std::sqrt(1.1 + 1e-5) + 1, 1e-14);
  EXPECT_NEAR(yi.at(1), 2 * (3 - 0.2) / std::sqrt(1.1 + 1e-5) + 1, 1e-14);
  EXPECT_NEAR(buffer(*bn, "running_mean")->at(0), 0.2, 1e-15) << "inference must not update running stats";
}

TEST(BatchNorm, TrainingNormalizesEachChannelOverBatchAndSpace) {
  Rng rng(2);
  auto bn = build_layer("batchnorm momentum=0.5 epsilon=1e-12", {3, 4, 5});
  Tensor x = random_tensor({6, 3, 4, 5}, rng, DType::f64, 3.0);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, x.at(i) + 10.0 * ((i / 20) % 3));  // channel offsets
  Tensor y = bn->forward(x, true);
  const std::int64_t count = 6 * 20;
  for (int c = 0; c < 3; ++c) {
    double sx = 0, sxx = 0, sy = 0, syy = 0;
    for (int n = 0; n < 6; ++n)
      for (int s = 0; s < 20; ++s) {
        const std::int64_t i = (n * 3 + c) * 20 + s;
        sx += x.at(i), sxx += x.at(i) * x.at(i), sy += y.at(i), syy += y.at(i) * y.at(i);
      }
    EXPECT_NEAR(sy / count, 0, 1e-12) << "channel " << c;
    EXPECT_NEAR(syy / count, 1, 1e-9) << "channel " << c;
    const double mean = sx / count;
    const double unbiased = (sxx - count * mean * mean) / (count - 1);
    EXPECT_NEAR(buffer(*bn, "running_mean")->at(c), 0.5 * mean, 1e-12) << "channel " << c;
    EXPECT_NEAR(buffer(*bn, "running_var")->at(c), 0.5 + 0.5 * unbiased, 1e-9) << "channel " << c;
  }
}

TEST(BatchNorm, RunningStatsConvergeToPopulationStats) {
  // Repeated batches of the same data: running stats approach its mean and
  // unbiased variance geometrically, (1 - momentum)^k.
  Rng rng(4);
  auto bn = build_layer("batchnorm momentum=0.3", {2});
  Tensor x = random_tensor({16, 2}, rng);
  for (int k = 0; k < 100; ++k) bn->forward(x, true);
  for (int f = 0; f < 2; ++f) {
    double s = 0, ss = 0;
    for (int n = 0; n < 16; ++n) s += x.at(n * 2 + f);
    const double mean = s / 16;
    for (int n = 0; n < 16; ++n) ss += (x.at(n * 2 + f) - mean) * (x.at(n * 2 + f) - mean);
    EXPECT_NEAR(buffer(*bn, "running_mean")->at(f), mean, 1e-12);
    EXPECT_NEAR(buffer(*bn, "running_var")->at(f), ss / 15, 1e-12);
  }
}

TEST(BatchNorm, FiniteDifferencesTraining) {
  Rng rng(5);
  auto conv = build_layer("batchnorm", {3, 2, 3});
  randomize_state(*conv, rng);
  check_gradients(*conv, random_tensor({4, 3, 2, 3}, rng), true);
  auto dense = build_layer("batchnorm", {5});
  randomize_state(*dense, rng);
  check_gradients(*dense, random_tensor({6, 5}, rng), true);
}

TEST(BatchNorm, FiniteDifferencesInference) {
  Rng rng(6);
  auto conv = build_layer("batchnorm", {3, 2, 3});
  randomize_state(*conv, rng);
  check_gradients(*conv, random_tensor({4, 3, 2, 3}, rng), false);
  auto dense = build_layer("batchnorm", {5});
  randomize_state(*dense, rng);
  // A batch of one is fine without batch statistics.
  check_gradients(*dense, random_tensor({1, 5}, rng), false);
}

TEST(BatchNorm, Float32MatchesFloat64) {
  for (bool training : {true, false}) {
    SCOPED_TRACE(training ? "training" : "inference");
    Rng rng(7);
    auto b64 = build_layer("batchnorm", {4, 3, 3}, DType::f64);
    auto b32 = build_layer("batchnorm", {4, 3, 3}, DType::f32);
    randomize_state(*b64, rng);
    for (std::size_t i = 0; i < 2; ++i) b32->params()[i]->value.copy_from(b64->params()[i]->value.to(DType::f32));
    for (const char* name : {"running_mean", "running_var"}) buffer(*b32, name)->copy_from(buffer(*b64, name)->to(DType::f32));
    // A large common offset: float32 sums would lose the variance, double sums do not.
    Tensor x64 = random_tensor({8, 4, 3, 3}, rng);
    for (std::int64_t i = 0; i < x64.numel(); ++i) x64.set(i, x64.at(i) + 100.0);
    x64 = x64.to(DType::f32).to(DType::f64);  // both see the same input
    Tensor dy64 = random_tensor({8, 4, 3, 3}, rng);
    Tensor y32 = b32->forward(x64.to(DType::f32), training);
    Tensor dx32 = b32->backward(dy64.to(DType::f32));
    Tensor y64 = b64->forward(x64, training);
    Tensor dx64 = b64->backward(dy64);
    const double tol = training ? 1e-4 : 1e-3;  // inference divides (x - mean) ~ 100 by sqrt(var) ~ 1
    testing::expect_close(y32.to(DType::f64), y64, tol, "y");
    testing::expect_close(dx32.to(DType::f64), dx64, 1e-4, "dx");
    for (std::size_t i = 0; i < 2; ++i)
      testing::expect_close(b32->params()[i]->grad.to(DType::f64), b64->params()[i]->grad, 1e-4, "param grad");
    testing::expect_close(buffer(*b32, "running_var")->to(DType::f64), *buffer(*b64, "running_var"), 1e-5,
                          "running_var");
  }
}

// Layout::channels16 (what conv2d's oneDNN path hands on inside a Network):
// the same results as the plain layout, y and dx in the input's layout, and
// sums whose order depends on the shape only, not on the thread count; with
// and without the ReLU that Network fuses into batch norm.
TEST(BatchNorm, Channels16MatchesPlainAndIgnoresThreadCount) {
  const Shape shape{6, 32, 5, 3};
  Rng rng(11);
  const Tensor x = random_tensor(shape, rng, DType::f32, 2.0);
  const Tensor dy = random_tensor(shape, rng, DType::f32);
  for (auto [training, relu] : {std::pair{true, false}, {false, false}, {true, true}, {false, true}}) {
    SCOPED_TRACE(std::string(training ? "training" : "inference") + (relu ? ", fused relu" : ""));
    struct Result {
      Tensor y, dx, dscale, doffset, running_var;
    };
    auto run = [&](Layout layout, int threads) {
      Rng init(3);
      auto bn = build_layer("batchnorm", {32, 5, 3}, DType::f32);
      randomize_state(*bn, init);
      EXPECT_EQ(bn->takes_blocked_input(), true);
      if (relu) EXPECT_TRUE(bn->fuse_relu());
      const int before = cpu_threads();
      set_cpu_threads(threads);
      Tensor y = bn->forward(x.in_layout(layout), training);
      Tensor dx = bn->backward(dy.in_layout(layout));
      set_cpu_threads(before);
      EXPECT_EQ(y.layout(), layout);
      EXPECT_EQ(dx.layout(), layout);
      return Result{y.plain(), dx.plain(), bn->params()[0]->grad.clone(), bn->params()[1]->grad.clone(),
                    buffer(*bn, "running_var")->clone()};
    };
    const Result plain = run(Layout::plain, 2);
    const Result one = run(Layout::channels16, 1);
    const Result two = run(Layout::channels16, 2);
    testing::expect_close(one.y.to(DType::f64), plain.y.to(DType::f64), 1e-5, "y");
    testing::expect_close(one.dx.to(DType::f64), plain.dx.to(DType::f64), 1e-5, "dx");
    testing::expect_close(one.dscale.to(DType::f64), plain.dscale.to(DType::f64), 1e-5, "dscale");
    testing::expect_close(one.doffset.to(DType::f64), plain.doffset.to(DType::f64), 1e-5, "doffset");
    testing::expect_close(one.running_var.to(DType::f64), plain.running_var.to(DType::f64), 1e-6, "running_var");
    if (relu) {  // the ReLU was applied, and where it cut, no gradient passed
      std::int64_t cut = 0;
      for (std::int64_t i = 0; i < plain.y.numel(); ++i) {
        ASSERT_GE(one.y.at(i), 0.0) << i;
        cut += plain.y.at(i) == 0.0;
      }
      EXPECT_GT(cut, plain.y.numel() / 5);
    }
    for (auto [a, b] : {std::pair{&one.y, &two.y}, {&one.dx, &two.dx}, {&one.dscale, &two.dscale}})
      EXPECT_EQ(std::memcmp(a->raw(), b->raw(), a->bytes()), 0) << "1 and 2 threads differ";
  }
  // Float64 and channel counts that are not multiples of 16 stay plain.
  EXPECT_FALSE(build_layer("batchnorm", {32, 5, 3}, DType::f64)->takes_blocked_input());
  EXPECT_FALSE(build_layer("batchnorm", {24, 5, 3}, DType::f32)->takes_blocked_input());
  EXPECT_FALSE(build_layer("batchnorm", {32}, DType::f32)->takes_blocked_input());
}

// Features (F per sample, spatial size 1): every sum is a channel's values
// added sample by sample in double, whatever the loops' order and the
// thread count. A plain reference of that order, bitwise, with a channel
// count that splits unevenly into any vector width, f32 and f64, training
// (with and without the fused ReLU) and inference.
template <class T>
void expect_features_match_reference(DType dtype) {
  const std::int64_t N = 40, C = 1003;  // past the size from which the loops run in parallel
  Rng rng(21);
  const Tensor x = random_tensor({N, C}, rng, dtype, 2.0);
  const Tensor dy = random_tensor({N, C}, rng, dtype);
  for (auto [training, relu] : {std::pair{true, false}, {true, true}, {false, false}}) {
    SCOPED_TRACE(std::string(training ? "training" : "inference") + (relu ? ", fused relu" : ""));
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      Rng init(3);
      auto bn = build_layer("batchnorm", {C}, dtype);
      randomize_state(*bn, init);
      if (relu) bn->fuse_relu();
      const T* g = bn->params()[0]->value.template data<T>();
      const T* b = bn->params()[1]->value.template data<T>();
      std::vector<T> rm(buffer(*bn, "running_mean")->template data<T>(), buffer(*bn, "running_mean")->template data<T>() + C);
      std::vector<T> rv(buffer(*bn, "running_var")->template data<T>(), buffer(*bn, "running_var")->template data<T>() + C);
      const int before = cpu_threads();
      set_cpu_threads(threads);
      const Tensor y = bn->forward(x, training);
      const Tensor dx = bn->backward(dy);
      set_cpu_threads(before);
      const T* xp = x.data<T>();
      const T* dyp = dy.data<T>();
      for (std::int64_t c = 0; c < C; ++c) {
        double mean = rm[c], var = rv[c];
        if (training) {
          double sum = 0, sq = 0;
          for (std::int64_t n = 0; n < N; ++n) sum += static_cast<double>(xp[n * C + c]);
          mean = sum / N;
          for (std::int64_t n = 0; n < N; ++n) sq += (xp[n * C + c] - mean) * (xp[n * C + c] - mean);
          var = sq / N;
          ASSERT_EQ(buffer(*bn, "running_mean")->template data<T>()[c], static_cast<T>(0.9 * rm[c] + 0.1 * mean));
          ASSERT_EQ(buffer(*bn, "running_var")->template data<T>()[c],
                    static_cast<T>(0.9 * rv[c] + 0.1 * var * N / (N - 1)));
        }
        const double inv = 1.0 / std::sqrt(var + 1e-5);
        std::vector<T> h(N), d(N);
        double sum_dy = 0, sum_dy_h = 0;
        for (std::int64_t n = 0; n < N; ++n) {
          const std::int64_t i = n * C + c;
          h[n] = static_cast<T>((xp[i] - mean) * inv);
          T out = g[c] * h[n] + b[c];
          if (relu) out = out > T(0) ? out : T(0);
          ASSERT_EQ(y.data<T>()[i], out) << "y at sample " << n << ", channel " << c;
          d[n] = relu && out <= T(0) ? T(0) : dyp[i];
          sum_dy += static_cast<double>(d[n]);
          sum_dy_h += static_cast<double>(d[n]) * h[n];
        }
        ASSERT_EQ(bn->params()[0]->grad.template data<T>()[c], static_cast<T>(sum_dy_h)) << "dscale " << c;
        ASSERT_EQ(bn->params()[1]->grad.template data<T>()[c], static_cast<T>(sum_dy)) << "doffset " << c;
        const double k = g[c] * inv, mean_d = training ? sum_dy / N : 0.0, mean_dh = training ? sum_dy_h / N : 0.0;
        for (std::int64_t n = 0; n < N; ++n)
          ASSERT_EQ(dx.data<T>()[n * C + c], static_cast<T>(k * (d[n] - mean_d - h[n] * mean_dh)))
              << "dx at sample " << n << ", channel " << c;
      }
    }
  }
}

TEST(BatchNorm, FeaturesSumSampleBySampleWhateverTheThreads) {
  expect_features_match_reference<float>(DType::f32);
  expect_features_match_reference<double>(DType::f64);
}

TEST(BatchNorm, Errors) {
  EXPECT_THROW(build_layer("batchnorm momentum=1.5", {3}), Error);
  EXPECT_THROW(build_layer("batchnorm epsilon=0", {3}), Error);
  EXPECT_THROW(build_layer("batchnorm", {3, 4}), Error);  // neither C x H x W nor F
  EXPECT_THROW(build_layer("batchnorm scale=1", {3}), Error);
  auto bn = build_layer("batchnorm", {3});
  EXPECT_THROW(bn->forward(Tensor({1, 3}, DType::f64), true), Error);  // one value per channel
  try {
    bn->forward(Tensor({4, 3}, DType::f32), true);
    FAIL() << "expected a dtype error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batchnorm"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dlscale
