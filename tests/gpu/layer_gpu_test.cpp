// Every CUDA layer function against its CPU layer (built through the
// registry, in float64): the same float32-representable inputs and
// parameters go to both, and the GPU's float32 outputs and gradients must
// stay within a relative error bound of the CPU's, measured against the
// largest magnitude of the tensor: max|gpu - cpu| / max|cpu|. Bounds:
//   1e-4  GEMM/cuDNN layers (dense, conv2d, batchnorm): float32 sums of up to a
//         few hundred products, in another order than the CPU's, give ~1e-6;
//         cuDNN may pick Winograd or FFT algorithms, which lose another order of
//         magnitude. A wrong index or transpose gives errors of order 1.
//   1e-5  activations: CUDA's erff/expf/tanhf are within 2 ulp (~2.4e-7).
//   1e-6  softmax, pooling and the optimizers, which round once per float
//         result (pooling and the optimizers repeat the CPU's float operations in
//         the CPU's order; softmax works in double like the CPU).
//   5e-3  fp16 math (automatic-mixed) of dense and conv2d: each operand is
//         rounded to fp16 (unit roundoff u = 2^-11 = 4.9e-4), so each product is
//         off by up to 2u; sums of random-sign terms keep that relative to the
//         largest result, and conv2d rounds its result to fp16 once more (u):
//         ~1.5e-3 expected, 5e-3 leaves room; a wrong type or layout gives order 1.
//   3e-2  bf16 math: the same with u = 2^-8 = 3.9e-3 (~1.2e-2 expected).
// Dropout's masks come from another generator, so its test checks statistics.
// On a machine without a GPU every test is skipped with the reason.
// Every check of a measured value prints it with its bound ("measured: ...",
// measured.h), pass or fail; each test also prints
// "[ GPU_CHECK ] <test> max_rel_err=<e>" for bench/gpu_check.sh's table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "expect_error.h"
#include "gpu/measured.h"
#include "layers/conv2d.h"
#include "layers/cuda_layers.h"
#include "layers/layer_factory.h"
#include "layers/softmax.h"
#include "runtime/training/cuda_optimizer.h"
#include "runtime/core/gpu.h"
#include "runtime/core/gpu_context.h"
#include "runtime/training/optimizer.h"
#include "runtime/core/rng.h"

namespace dlscale {
namespace {

using testing::above;
using testing::at_least;
using testing::at_most;
using testing::between;
using testing::Bound;
using testing::build_layer;
using testing::equal_to;
using testing::measured;
using testing::near;

// Float32 values (so both backends see the same numbers), returned as float64.
Tensor uniform(const Shape& shape, Rng& rng, double lo, double hi) {
  Tensor t(shape, DType::f64);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<float>(rng.uniform(lo, hi)));
  return t;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.at(i)));
  return m;
}

using gpu::MathPrecision;
constexpr MathPrecision kAllMath[] = {MathPrecision::f32, MathPrecision::f16, MathPrecision::bf16};

// The error bound of a GEMM or cuDNN layer computing in `math` (see the top).
double gemm_bound(MathPrecision math) {
  return math == MathPrecision::f32 ? 1e-4 : math == MathPrecision::f16 ? 5e-3 : 3e-2;
}

class LayerGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuInfo gpu = query_gpus();
    if (gpu.device_count == 0) GTEST_SKIP() << "no GPU present: " << gpu.reason;
    ctx_ = std::make_unique<GpuContext>(0, 0, GpuOptions{});
  }
  void TearDown() override {
    if (!ctx_) return;
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::printf("[ GPU_CHECK ] %s.%s max_rel_err=%.3g\n", info->test_suite_name(), info->name(), worst_);
  }

  DeviceBuffer up(const Tensor& t) { return to_device(*ctx_, t.dtype() == DType::f32 ? t : t.to(DType::f32)); }
  Tensor down(const DeviceBuffer& b, const Shape& shape) { return to_host(*ctx_, b.get(), shape); }
  DeviceBuffer zeros(std::int64_t count) {
    DeviceBuffer b = ctx_->alloc(sizeof(float) * count);
    ctx_->zero(b.get(), sizeof(float) * count);
    return b;
  }

  // The GPU result (float32) against the CPU reference: the largest
  // |gpu - cpu| relative to the reference's largest magnitude, printed with
  // and checked against `bound`; returns it.
  double compare(const Tensor& gpu, const Tensor& cpu, const Bound& bound, const std::string& what,
                 const std::string& on_failure = "") {
    EXPECT_EQ(gpu.shape(), cpu.shape()) << what;
    if (gpu.shape() != cpu.shape()) return 1;
    const double scale = std::max(max_abs(cpu), 1e-30);
    double worst = 0;
    std::int64_t at = 0;
    for (std::int64_t i = 0; i < cpu.numel(); ++i) {
      const double e = std::abs(gpu.at(i) - cpu.at(i)) / scale;
      if (!(e <= worst)) worst = e, at = i;  // NaN counts as the worst
    }
    worst_ = std::max(worst_, worst);
    EXPECT_TRUE(measured(what + " max rel err", worst, bound))
        << "element " << at << " is " << gpu.at(at) << " on the GPU and " << cpu.at(at) << " on the CPU (scale "
        << scale << ")" << on_failure;
    return worst;
  }
  double compare(const Tensor& gpu, const Tensor& cpu, double bound, const std::string& what) {
    return compare(gpu, cpu, at_most(bound), what);
  }
  // compare() for a layer computing in `math`. Under 2-byte math the error
  // must also be above a floor (random float32 operands are almost never
  // exactly representable in 2 bytes): a layer that ignored the math and
  // computed in float32 would pass the bound alone.
  void compare_in(MathPrecision math, const Tensor& gpu, const Tensor& cpu, const std::string& what) {
    if (math == MathPrecision::f32) {
      compare(gpu, cpu, gemm_bound(math), what);
      return;
    }
    const double floor = math == MathPrecision::f16 ? 1e-5 : 1e-4;
    compare(gpu, cpu, between(floor, gemm_bound(math)), what,
            std::string("; an error at the floor or under means it did not compute in ") + gpu::name_of(math));
  }
  // Statistical checks report their own deviation.
  void note(double deviation) { worst_ = std::max(worst_, deviation); }

  // Makes every parameter float32-representable and, where asked, random.
  void randomize_params(Layer& layer, Rng& rng, double lo, double hi) {
    for (Param* p : layer.params()) p->value.copy_from(uniform(p->value.shape(), rng, lo, hi).to(p->value.dtype()));
  }

  std::unique_ptr<GpuContext> ctx_;
  double worst_ = 0;
};

// ---------------------------------------------------------------- dense
TEST_F(LayerGpu, DenseMatchesCpu) {
  for (const MathPrecision math : kAllMath)
  for (const bool bias : {true, false}) {
    for (const bool input_grad : {true, false}) {
      MEASURED_SCOPE(std::string(gpu::name_of(math)) + " bias=" + std::to_string(bias) +
                     " input_grad=" + std::to_string(input_grad));
      Rng rng(11);
      const Shape in{3, 4, 5};
      const std::int64_t n = 16, f = 60, u = 7;
      auto layer = build_layer(std::string("dense units=7 bias=") + (bias ? "true" : "false"), in);
      layer->set_input_grad_needed(input_grad);
      randomize_params(*layer, rng, -0.5, 0.5);
      const Tensor x = uniform({n, 3, 4, 5}, rng, -1, 1), dy = uniform({n, u}, rng, -1, 1);
      const Tensor y = layer->forward(x, true);
      const Tensor dx = layer->backward(dy);
      auto params = layer->params();

      DeviceBuffer gx = up(x), gdy = up(dy), gw = up(params[0]->value);
      DeviceBuffer gb = bias ? up(params[1]->value) : DeviceBuffer();
      DeviceBuffer gy = zeros(n * u), gdx = input_grad ? zeros(n * f) : DeviceBuffer(), gdw = zeros(u * f);
      DeviceBuffer gdb = bias ? zeros(u) : DeviceBuffer();
      gpu::dense_forward(*ctx_, gx.as<float>(), gw.as<float>(), gb.as<float>(), gy.as<float>(), n, f, u, math);
      gpu::dense_backward(*ctx_, gx.as<float>(), gw.as<float>(), gdy.as<float>(), gdx.as<float>(), gdw.as<float>(),
                          gdb.as<float>(), n, f, u, math);
      compare_in(math, down(gy, {n, u}), y, "dense y");
      if (input_grad) compare_in(math, down(gdx, x.shape()), dx, "dense dx");
      compare_in(math, down(gdw, {u, f}), params[0]->grad, "dense dW");
      if (bias) compare(down(gdb, {u}), params[1]->grad, 1e-4, "dense db (float32 sums in every math)");
    }
  }
}

// ---------------------------------------------------------------- mixed precision
// The 2-byte copies: exact where the type can hold the value, rounded to
// nearest within half a unit in the last place otherwise, and fp16 (not
// bf16) overflows to Inf past 65504, the overflow the loss scaler must see.
TEST_F(LayerGpu, HalfCopiesRoundToNearestAndFp16OverflowsToInf) {
  const std::vector<float> values = {0.f, -2.f, 0.5f, 1024.f, 1.f / 3.f, -0.1f, 1e5f, -3e38f};
  const std::int64_t n = static_cast<std::int64_t>(values.size());
  Tensor host({n}, DType::f32);
  for (std::int64_t i = 0; i < n; ++i) host.set(i, values[i]);
  const DeviceBuffer x = up(host);
  for (const MathPrecision math : {MathPrecision::f16, MathPrecision::bf16}) {
    MEASURED_SCOPE(gpu::name_of(math));
    const DeviceBuffer h = gpu::to_half(*ctx_, math, x.as<float>(), n);
    DeviceBuffer back = zeros(n);
    gpu::from_half(*ctx_, math, h.get(), back.as<float>(), n);
    const Tensor got = down(back, {n});
    const double half_ulp = math == MathPrecision::f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    const auto round_trip = [&](std::int64_t i) { return "round trip of " + testing::measured_number(values[i]); };
    for (std::int64_t i = 0; i < 4; ++i)
      EXPECT_TRUE(measured(round_trip(i), got.at(i), equal_to(values[i]))) << "exactly representable";
    // Not representable in 2 bytes: some error, at most half a unit in the last place.
    for (std::int64_t i = 4; i < 6; ++i)
      EXPECT_TRUE(measured(round_trip(i) + " rel err", std::abs(got.at(i) - values[i]) / std::abs(values[i]),
                           between(0, half_ulp)));
    if (math == MathPrecision::f16) {
      EXPECT_TRUE(measured(round_trip(6), got.at(6), equal_to(INFINITY))) << "past 65504 in fp16";
      EXPECT_TRUE(measured(round_trip(7), got.at(7), equal_to(-INFINITY))) << "past -65504 in fp16";
    } else {
      for (std::int64_t i = 6; i < 8; ++i)
        EXPECT_TRUE(measured(round_trip(i) + " rel err", std::abs(got.at(i) - values[i]) / std::abs(values[i]),
                             at_most(half_ulp)));
    }
    note(std::abs(got.at(4) - values[4]) / std::abs(values[4]));
  }
}

// ---------------------------------------------------------------- activations
TEST_F(LayerGpu, ActivationsMatchCpu) {
  const std::vector<std::string> lines = {"relu", "leakyrelu alpha=0.2", "gelu", "tanh", "sigmoid"};
  for (const std::string& line : lines) {
    MEASURED_SCOPE(line);
    Rng rng(3);
    const Shape in{3, 5, 5};
    auto layer = build_layer(line, in);
    Tensor x = uniform({8, 3, 5, 5}, rng, -4, 4);
    for (std::int64_t i = 0; i < x.numel(); i += 17) x.set(i, 0.0);  // the kinks
    const Tensor dy = uniform(x.shape(), rng, -1, 1);
    const Tensor y = layer->forward(x, true);
    const Tensor dx = layer->backward(dy);

    const std::string kind = line.substr(0, line.find(' '));
    const double alpha = kind == "leakyrelu" ? 0.2 : 0.0;
    const std::int64_t count = x.numel();
    DeviceBuffer gx = up(x), gdy = up(dy), gy = zeros(count), gdx = zeros(count);
    const gpu::Activation a = gpu::activation_from_kind(kind);
    gpu::activation_forward(*ctx_, a, alpha, gx.as<float>(), gy.as<float>(), count);
    gpu::activation_backward(*ctx_, a, alpha, gx.as<float>(), gy.as<float>(), gdy.as<float>(), gdx.as<float>(),
                             count);
    compare(down(gy, x.shape()), y, 1e-5, line + " y");
    compare(down(gdx, x.shape()), dx, 1e-5, line + " dx");
  }
  testing::expect_error([] { gpu::activation_from_kind("swish"); }, "no activation 'swish'");
}

// ---------------------------------------------------------------- softmax + cross-entropy
TEST_F(LayerGpu, SoftmaxCrossEntropyMatchesCpu) {
  for (const std::int64_t k : {10, 1000}) {
    MEASURED_SCOPE("classes=" + std::to_string(k));
    Rng rng(5);
    const std::int64_t n = 64;
    Tensor logits = uniform({n, k}, rng, -5, 5);
    // Ties: the first maximum counts for accuracy, on both backends.
    for (std::int64_t i = 0; i < n; i += 4) {
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < k; ++j)
        if (logits.at(i * k + j) > logits.at(i * k + best)) best = j;
      logits.set(i * k + (best + 1) % k, logits.at(i * k + best));
    }
    std::vector<std::int32_t> labels(n);
    for (std::int64_t i = 0; i < n; ++i) labels[i] = static_cast<std::int32_t>(rng.below(k));
    for (std::int64_t i = 0; i < n; i += 4) {  // make some predictions right, including tied ones
      std::int64_t best = 0;
      for (std::int64_t j = 1; j < k; ++j)
        if (logits.at(i * k + j) > logits.at(i * k + best)) best = j;
      labels[i] = static_cast<std::int32_t>(i % 8 == 0 ? best : (best + 1) % k);
    }
    const double normalizer = 256;  // the global batch: larger than this rank's share
    Tensor dlogits;
    const LossResult cpu = softmax_cross_entropy(logits, labels.data(), normalizer, dlogits);

    DeviceBuffer gz = up(logits), gd = zeros(n * k), gl = ctx_->alloc(sizeof(std::int32_t) * n);
    ctx_->upload(gl.get(), labels.data(), sizeof(std::int32_t) * n);
    const gpu::LossSums g = gpu::softmax_cross_entropy(*ctx_, gz.as<float>(), gl.as<std::int32_t>(), n, k,
                                                       normalizer, gd.as<float>());
    EXPECT_TRUE(measured("correct predictions", g.correct, equal_to(cpu.correct)));
    EXPECT_GT(cpu.correct, 0) << "the test data must have right predictions";
    const double loss_err = std::abs(g.loss_sum - cpu.loss_sum) / std::abs(cpu.loss_sum);
    note(loss_err);
    EXPECT_TRUE(measured("loss sum rel err", loss_err, at_most(1e-10))) << "loss sums in double on both backends";
    compare(down(gd, {n, k}), dlogits, 1e-6, "dlogits");
    const gpu::LossSums eval =
        gpu::softmax_cross_entropy(*ctx_, gz.as<float>(), gl.as<std::int32_t>(), n, k, 1.0, nullptr);
    // Without the gradient: the same sums (4 units in the last place of a double, as EXPECT_DOUBLE_EQ).
    EXPECT_TRUE(measured("loss sum without gradient, rel diff", std::abs(eval.loss_sum - g.loss_sum) /
                                                                    std::abs(g.loss_sum),
                         at_most(4 * std::numeric_limits<double>::epsilon())));
    EXPECT_TRUE(measured("correct predictions without gradient", eval.correct, equal_to(g.correct)));

    labels[3] = static_cast<std::int32_t>(k + 2);
    ctx_->upload(gl.get(), labels.data(), sizeof(std::int32_t) * n);
    testing::expect_error(
        [&] { gpu::softmax_cross_entropy(*ctx_, gz.as<float>(), gl.as<std::int32_t>(), n, k, 1.0, gd.as<float>()); },
        "label " + std::to_string(k + 2) + " of sample 3 is outside [0, " + std::to_string(k) + ")");
  }
}

TEST_F(LayerGpu, SoftmaxLayerMatchesCpu) {
  Rng rng(6);
  const std::int64_t n = 33, k = 70;
  auto layer = build_layer("softmax", {k});
  const Tensor x = uniform({n, k}, rng, -6, 6), dy = uniform({n, k}, rng, -1, 1);
  const Tensor y = layer->forward(x, true);
  const Tensor dx = layer->backward(dy);
  DeviceBuffer gx = up(x), gdy = up(dy), gy = zeros(n * k), gdx = zeros(n * k);
  gpu::softmax_forward(*ctx_, gx.as<float>(), gy.as<float>(), n, k);
  gpu::softmax_backward(*ctx_, gy.as<float>(), gdy.as<float>(), gdx.as<float>(), n, k);
  compare(down(gy, {n, k}), y, 1e-6, "softmax y");
  compare(down(gdx, {n, k}), dx, 1e-6, "softmax dx");
}

// ---------------------------------------------------------------- optimizers
TEST_F(LayerGpu, OptimizerStepsMatchCpu) {
  struct Case {
    std::string solver, clip;
  };
  for (const Case& c : {Case{"sgdm", "l2norm"}, Case{"adam", "global-l2norm"}, Case{"rmsprop", "l2norm"}}) {
    MEASURED_SCOPE(c.solver + " " + c.clip);
    SolverOptions o;
    o.solver = c.solver;
    o.squared_gradient_decay = c.solver == "rmsprop" ? 0.9 : 0.999;
    o.l2_regularization = 1e-3;
    o.gradient_threshold = 2.0;
    o.gradient_threshold_method = c.clip;
    auto cpu = make_optimizer(o);
    Rng rng(9);
    std::vector<Param> params(2);
    params[0] = {"weight", uniform({50, 30}, rng, -1, 1).to(DType::f32), Tensor({50, 30}), true};
    params[1] = {"bias", uniform({30}, rng, -1, 1).to(DType::f32), Tensor({30}), false};
    std::vector<Param*> list = {&params[0], &params[1]};

    std::vector<DeviceBuffer> value, grad, s1, s2;
    std::vector<gpu::DeviceParam> dev;
    for (Param& p : params) {
      value.push_back(up(p.value));
      grad.push_back(zeros(p.value.numel()));
      s1.push_back(zeros(p.value.numel()));
      s2.push_back(zeros(p.value.numel()));
      dev.push_back({value.back().as<float>(), grad.back().as<float>(), p.value.numel(), p.regularize});
    }
    const double lr = 0.05;
    for (int t = 1; t <= 3; ++t) {
      for (std::size_t i = 0; i < params.size(); ++i) {
        // Large enough that clipping acts (norms of ~20 against a threshold of 2).
        params[i].grad.copy_from(uniform(params[i].value.shape(), rng, -1, 1).to(DType::f32));
        ctx_->upload(dev[i].grad, params[i].grad.raw(), params[i].grad.bytes());
      }
      cpu->step(list, lr);
      for (const auto& p : dev)
        if (p.regularize) gpu::add_weight_decay(*ctx_, p.grad, p.value, p.count, o.l2_regularization);
      const double norm = gpu::clip_gradients(*ctx_, dev, o.gradient_threshold, o.gradient_threshold_method);
      EXPECT_TRUE(measured("gradient norm at step " + std::to_string(t), norm, above(o.gradient_threshold)))
          << "the test must exercise clipping";
      for (std::size_t i = 0; i < dev.size(); ++i) {
        const auto& p = dev[i];
        if (c.solver == "sgdm")
          gpu::sgdm_update(*ctx_, p.value, p.grad, s1[i].as<float>(), p.count, o.momentum, lr);
        else if (c.solver == "adam")
          gpu::adam_update(*ctx_, p.value, p.grad, s1[i].as<float>(), s2[i].as<float>(), p.count, o.gradient_decay,
                           o.squared_gradient_decay, o.epsilon, lr, t);
        else
          gpu::rmsprop_update(*ctx_, p.value, p.grad, s1[i].as<float>(), p.count, o.squared_gradient_decay,
                              o.epsilon, lr);
      }
      for (std::size_t i = 0; i < params.size(); ++i)
        compare(down(value[i], params[i].value.shape()), params[i].value, 1e-6,
                params[i].name + " after step " + std::to_string(t));
    }
  }
}

// ---------------------------------------------------------------- conv2d
// How many elements of two tensors of one shape differ (NaN counts).
std::int64_t changed(const Tensor& a, const Tensor& b) {
  std::int64_t count = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) count += !(a.at(i) == b.at(i));
  return count;
}

gpu::ConvShape conv_shape(const Conv2dGeometry& g, std::int64_t batch) {
  gpu::ConvShape s;
  s.batch = batch, s.channels = g.channels, s.height = g.height, s.width = g.width;
  s.filters = g.filters, s.kernel = g.kernel, s.stride = g.stride;
  s.pad_top = g.pad_top, s.pad_left = g.pad_left, s.pad_bottom = g.pad_bottom, s.pad_right = g.pad_right;
  return s;
}

TEST_F(LayerGpu, Conv2dMatchesCpu) {
  struct Case {
    std::string line;
    Shape in;
  };
  const std::vector<Case> cases = {
      {"conv2d filters=5 kernel=3 padding=1", {3, 9, 8}},
      {"conv2d filters=4 kernel=3 stride=2", {2, 11, 10}},
      {"conv2d filters=3 kernel=4 padding=same", {2, 7, 7}},            // 1 row on top, 2 at the bottom
      {"conv2d filters=4 kernel=3 stride=2 padding=same", {3, 8, 9}},  // asymmetric in height only
      {"conv2d filters=6 kernel=1 bias=false", {4, 5, 5}},
      {"conv2d filters=8 kernel=1 stride=2 bias=false", {4, 8, 8}},  // ResNet projection shortcut
      {"conv2d filters=8 kernel=1 stride=2", {3, 7, 7}},             // odd plane: the last row/column is skipped
  };
  for (const MathPrecision math : kAllMath)
  for (const bool deterministic : {false, true}) {
    GpuOptions options;
    options.deterministic = deterministic;
    GpuContext ctx(0, 0, options);
    for (const Case& c : cases) {
      MEASURED_SCOPE(c.line + " " + gpu::name_of(math) + (deterministic ? " (deterministic)" : ""));
      Rng rng(21);
      const std::int64_t n = 4;
      auto layer = build_layer(c.line, c.in);
      randomize_params(*layer, rng, -0.5, 0.5);
      const auto& g = dynamic_cast<Conv2d&>(*layer).geometry();
      gpu::ConvShape s = conv_shape(g, n);
      s.math = math;
      Shape xs{n};
      xs.insert(xs.end(), c.in.begin(), c.in.end());
      const Shape ys{n, g.filters, g.out_height(), g.out_width()};
      const Tensor x = uniform(xs, rng, -1, 1), dy = uniform(ys, rng, -1, 1);
      const Tensor y = layer->forward(x, true);
      const Tensor dx = layer->backward(dy);
      auto params = layer->params();
      const bool bias = params.size() == 2;

      auto put = [&](const Tensor& t) { return to_device(ctx, t.to(DType::f32)); };
      auto fresh = [&](std::int64_t count) {
        DeviceBuffer b = ctx.alloc(sizeof(float) * count);
        ctx.zero(b.get(), sizeof(float) * count);
        return b;
      };
      DeviceBuffer gx = put(x), gdy = put(dy), gw = put(params[0]->value);
      DeviceBuffer gb = bias ? put(params[1]->value) : DeviceBuffer();
      DeviceBuffer gy = fresh(numel(ys)), gdx = fresh(x.numel()), gdw = fresh(params[0]->value.numel());
      DeviceBuffer gdb = bias ? fresh(g.filters) : DeviceBuffer();
      gpu::conv2d_forward(ctx, s, gx.as<float>(), gw.as<float>(), gb.as<float>(), gy.as<float>());
      gpu::conv2d_backward(ctx, s, gx.as<float>(), gw.as<float>(), gdy.as<float>(), gdx.as<float>(), gdw.as<float>(),
                           gdb.as<float>());
      compare_in(math, to_host(ctx, gy.get(), ys), y, "conv2d y");
      const Tensor gpu_dx = to_host(ctx, gdx.get(), xs), gpu_dw = to_host(ctx, gdw.get(), params[0]->value.shape());
      compare_in(math, gpu_dx, dx, "conv2d dx");
      compare_in(math, gpu_dw, params[0]->grad, "conv2d dW");
      if (bias)
        compare(to_host(ctx, gdb.get(), {g.filters}), params[1]->grad, 1e-4, "conv2d db (float32 sums in every math)");
      if (deterministic) {
        // A second backward gives the same bits.
        gpu::conv2d_backward(ctx, s, gx.as<float>(), gw.as<float>(), gdy.as<float>(), gdx.as<float>(),
                             gdw.as<float>(), gdb.as<float>());
        const Tensor again_dx = to_host(ctx, gdx.get(), xs), again_dw = to_host(ctx, gdw.get(), gpu_dw.shape());
        EXPECT_TRUE(measured("second backward: dx elements that changed", changed(again_dx, gpu_dx), equal_to(0)));
        EXPECT_TRUE(measured("second backward: dW elements that changed", changed(again_dw, gpu_dw), equal_to(0)));
      }
    }
  }
}

// ---------------------------------------------------------------- pooling
TEST_F(LayerGpu, PoolingMatchesCpuIncludingTies) {
  const std::vector<std::string> lines = {"maxpool size=2", "maxpool size=3 stride=2 padding=1",
                                          "avgpool size=3 stride=1 padding=1", "avgpool size=2"};
  for (const std::string& line : lines) {
    MEASURED_SCOPE(line);
    Rng rng(4);
    const std::int64_t n = 3, c = 4, h = 9, w = 8;
    auto layer = build_layer(line, {c, h, w});
    // Quarter steps in [-2, 2]: windows hold many equal maxima, and the
    // gradient must go to the first of them on both backends.
    Tensor x({n, c, h, w}, DType::f64);
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, std::round(rng.uniform(-8, 8)) / 4);
    const Tensor y = layer->forward(x, true);
    const Tensor dy = uniform(y.shape(), rng, -1, 1);
    const Tensor dx = layer->backward(dy);

    gpu::PoolShape s;
    s.batch = n, s.channels = c, s.height = h, s.width = w;
    const auto attr = [&](const std::string& key, std::int64_t fallback) {
      const auto at = line.find(key + "=");
      return at == std::string::npos ? fallback : std::stoll(line.substr(at + key.size() + 1));
    };
    s.size = attr("size", 1), s.stride = attr("stride", s.size), s.padding = attr("padding", 0);
    ASSERT_EQ(y.shape(), Shape({n, c, s.out_height(), s.out_width()}));
    const gpu::PoolMode mode = line.rfind("max", 0) == 0 ? gpu::PoolMode::max : gpu::PoolMode::average;
    DeviceBuffer gx = up(x), gdy = up(dy), gy = zeros(y.numel()), gdx = zeros(x.numel());
    DeviceBuffer arg = mode == gpu::PoolMode::max ? ctx_->alloc(sizeof(std::int32_t) * y.numel()) : DeviceBuffer();
    gpu::pool2d_forward(*ctx_, mode, s, gx.as<float>(), gy.as<float>(), arg.as<std::int32_t>());
    gpu::pool2d_backward(*ctx_, mode, s, gdy.as<float>(), arg.as<std::int32_t>(), gdx.as<float>());
    compare(down(gy, y.shape()), y, 1e-6, line + " y");
    compare(down(gdx, x.shape()), dx, 1e-6, line + " dx");
  }
}

// ---------------------------------------------------------------- globalavgpool
// Both backends add each plane in row-major order in float32 and scale by the
// same float, so the results agree to the bit (bound 0 on float32 inputs).
TEST_F(LayerGpu, GlobalAvgPoolMatchesCpu) {
  for (const Shape& in : {Shape{16, 7, 7}, Shape{3, 1, 1}, Shape{64, 8, 8}}) {
    SCOPED_TRACE(to_string(in));
    Rng rng(6);
    const std::int64_t n = 5;
    auto layer = build_layer("globalavgpool", in, DType::f32);
    Shape xs{n};
    xs.insert(xs.end(), in.begin(), in.end());
    const Tensor x = uniform(xs, rng, -2, 2).to(DType::f32);
    const Tensor y = layer->forward(x, true);
    const Tensor dy = uniform(y.shape(), rng, -1, 1).to(DType::f32);
    const Tensor dx = layer->backward(dy);
    const std::int64_t planes = n * in[0], area = in[1] * in[2];
    DeviceBuffer gx = up(x), gdy = up(dy), gy = zeros(y.numel()), gdx = zeros(x.numel());
    gpu::global_avgpool_forward(*ctx_, planes, area, gx.as<float>(), gy.as<float>());
    gpu::global_avgpool_backward(*ctx_, planes, area, gdy.as<float>(), gdx.as<float>());
    compare(down(gy, y.shape()), y.to(DType::f64), 0.0, "globalavgpool y");
    compare(down(gdx, x.shape()), dx.to(DType::f64), 0.0, "globalavgpool dx");
  }
}

// ---------------------------------------------------------------- sequence layers
// Embedding and posembedding repeat the CPU's float operations in its order
// (bound 0); layernorm works in double per row like the CPU (1e-6);
// attention's GEMMs sum in another order (1e-4).
TEST_F(LayerGpu, EmbeddingAndPosEmbeddingMatchCpu) {
  Rng rng(11);
  const std::int64_t n = 3, t = 7, vocab = 13, dim = 6;
  auto emb = build_layer("embedding vocab=13 dim=6", {t}, DType::f32);
  randomize_params(*emb, rng, -1, 1);
  Tensor ids({n, t}, DType::f32);
  for (std::int64_t i = 0; i < ids.numel(); ++i) ids.set(i, static_cast<double>(rng.below(vocab)));
  ids.set(4, 2.0), ids.set(9, 2.0);  // a repeated token: its gradient rows add up
  const Tensor y = emb->forward(ids, true);
  const Tensor dy = uniform(y.shape(), rng, -1, 1).to(DType::f32);
  emb->backward(dy);
  Param* w = emb->params()[0];
  DeviceBuffer gids = up(ids), gw = up(w->value), gy = zeros(y.numel()), gdy = up(dy), gdw = zeros(w->grad.numel());
  gpu::embedding_forward(*ctx_, gids.as<float>(), gw.as<float>(), gy.as<float>(), n * t, vocab, dim);
  gpu::embedding_backward(*ctx_, gids.as<float>(), gdy.as<float>(), gdw.as<float>(), n * t, vocab, dim);
  compare(down(gy, y.shape()), y.to(DType::f64), 0.0, "embedding y");
  compare(down(gdw, w->grad.shape()), w->grad.to(DType::f64), 0.0, "embedding dW");
  Tensor bad = ids.clone();
  bad.set(5, 13.0);
  DeviceBuffer gbad = up(bad);
  testing::expect_error([&] { gpu::embedding_forward(*ctx_, gbad.as<float>(), gw.as<float>(), gy.as<float>(), n * t,
                                                     vocab, dim); },
                        "token id 13.000000 at row 5");

  auto pos = build_layer("posembedding", {t, dim}, DType::f32);
  randomize_params(*pos, rng, -1, 1);
  const Tensor x = uniform({n, t, dim}, rng, -2, 2).to(DType::f32);
  const Tensor py = pos->forward(x, true);
  pos->backward(dy);
  Param* p = pos->params()[0];
  DeviceBuffer gx = up(x), gp = up(p->value), gpy = zeros(py.numel()), gdp = zeros(p->grad.numel());
  gpu::posembedding_forward(*ctx_, gx.as<float>(), gp.as<float>(), gpy.as<float>(), n, t * dim);
  gpu::posembedding_backward(*ctx_, gdy.as<float>(), gdp.as<float>(), n, t * dim);
  compare(down(gpy, py.shape()), py.to(DType::f64), 0.0, "posembedding y");
  compare(down(gdp, p->grad.shape()), p->grad.to(DType::f64), 0.0, "posembedding dP");
}

TEST_F(LayerGpu, LayerNormMatchesCpu) {
  Rng rng(12);
  const std::int64_t n = 4, t = 9, c = 48, rows = n * t;
  auto layer = build_layer("layernorm", {t, c}, DType::f32);
  randomize_params(*layer, rng, 0.5, 1.5);
  const Tensor x = uniform({n, t, c}, rng, -3, 3).to(DType::f32);
  const Tensor y = layer->forward(x, true);
  const Tensor dy = uniform(y.shape(), rng, -1, 1).to(DType::f32);
  const Tensor dx = layer->backward(dy);
  auto params = layer->params();
  DeviceBuffer gx = up(x), gs = up(params[0]->value), go = up(params[1]->value), gy = zeros(y.numel()),
               gxh = zeros(x.numel()), gdy = up(dy), gdx = zeros(x.numel()), gds = zeros(c), gdo = zeros(c);
  DeviceBuffer grstd = ctx_->alloc(sizeof(double) * rows);
  gpu::layernorm_forward(*ctx_, gx.as<float>(), gs.as<float>(), go.as<float>(), gy.as<float>(), gxh.as<float>(),
                         grstd.as<double>(), rows, c, 1e-5);
  gpu::layernorm_backward(*ctx_, gdy.as<float>(), gxh.as<float>(), grstd.as<double>(), gs.as<float>(),
                          gdx.as<float>(), gds.as<float>(), gdo.as<float>(), rows, c);
  compare(down(gy, y.shape()), y.to(DType::f64), 1e-6, "layernorm y");
  compare(down(gdx, x.shape()), dx.to(DType::f64), 1e-6, "layernorm dx");
  compare(down(gds, {c}), params[0]->grad.to(DType::f64), 1e-6, "layernorm dscale");
  compare(down(gdo, {c}), params[1]->grad.to(DType::f64), 1e-6, "layernorm doffset");
}

TEST_F(LayerGpu, AttentionMatchesCpu) {
  for (bool causal : {false, true}) {
    MEASURED_SCOPE(causal ? "causal" : "full");
    Rng rng(13);
    const std::int64_t n = 3, t = 16, c = 32, heads = 4;
    auto layer = build_layer(std::string("attention heads=4 causal=") + (causal ? "true" : "false"), {t, c},
                             DType::f32);
    randomize_params(*layer, rng, -0.3, 0.3);
    const Tensor x = uniform({n, t, c}, rng, -1, 1).to(DType::f32);
    const Tensor y = layer->forward(x, true);
    const Tensor dy = uniform(y.shape(), rng, -1, 1).to(DType::f32);
    const Tensor dx = layer->backward(dy);
    auto params = layer->params();
    std::vector<DeviceBuffer> value, grad;
    for (Param* p : params) value.push_back(up(p->value)), grad.push_back(zeros(p->value.numel()));
    DeviceBuffer gx = up(x), gy = zeros(y.numel()), gdy = up(dy), gdx = zeros(x.numel());
    DeviceBuffer q = zeros(n * t * c), k = zeros(n * t * c), v = zeros(n * t * c), p = zeros(n * heads * t * t),
                 o = zeros(n * t * c);
    const gpu::AttentionShape shape{n, t, c, heads, causal};
    const gpu::AttentionParams w{value[0].as<float>(), value[1].as<float>(), value[2].as<float>(),
                                 value[3].as<float>()};
    const gpu::AttentionSaved saved{q.as<float>(), k.as<float>(), v.as<float>(), p.as<float>(), o.as<float>()};
    gpu::attention_forward(*ctx_, shape, gx.as<float>(), w, gy.as<float>(), saved);
    gpu::attention_backward(*ctx_, shape, gx.as<float>(), gdy.as<float>(), w, saved, gdx.as<float>(),
                            grad[0].as<float>(), grad[1].as<float>(), grad[2].as<float>(), grad[3].as<float>());
    compare(down(gy, y.shape()), y.to(DType::f64), 1e-4, "attention y");
    compare(down(gdx, x.shape()), dx.to(DType::f64), 1e-4, "attention dx");
    for (std::size_t i = 0; i < params.size(); ++i)
      compare(down(grad[i], params[i]->grad.shape()), params[i]->grad.to(DType::f64), 1e-4,
              "attention d" + params[i]->name);
  }
}

// ---------------------------------------------------------------- batchnorm
TEST_F(LayerGpu, BatchNormMatchesCpuInTrainingAndInference) {
  struct Case {
    Shape in;
    std::int64_t batch;
  };
  for (const Case& c : {Case{{4, 5, 6}, 8}, Case{{12}, 16}}) {
    MEASURED_SCOPE("input " + to_string(c.in));
    Rng rng(8);
    auto layer = build_layer("batchnorm momentum=0.2", c.in);
    auto params = layer->params();  // scale, offset
    params[0]->value.copy_from(uniform({c.in[0]}, rng, 0.5, 1.5));
    params[1]->value.copy_from(uniform({c.in[0]}, rng, -0.5, 0.5));
    auto buffers = layer->buffers();  // running_mean, running_var
    buffers[0].second->copy_from(uniform({c.in[0]}, rng, -0.2, 0.2));
    buffers[1].second->copy_from(uniform({c.in[0]}, rng, 0.5, 1.5));
    const gpu::BatchNormShape s{c.batch, c.in[0], numel(c.in) / c.in[0]};
    Shape xs{c.batch};
    xs.insert(xs.end(), c.in.begin(), c.in.end());
    const std::int64_t count = numel(xs), C = c.in[0];
    // An offset mean: the variance must not come from E[x²] - E[x]².
    const Tensor x = uniform(xs, rng, 2, 4), dy = uniform(xs, rng, -1, 1);

    DeviceBuffer gx = up(x), gdy = up(dy), gscale = up(params[0]->value), goffset = up(params[1]->value);
    DeviceBuffer gmean = up(*buffers[0].second), gvar = up(*buffers[1].second);
    DeviceBuffer gy = zeros(count), gdx = zeros(count), gds = zeros(C), gdo = zeros(C);
    DeviceBuffer save_mean = zeros(C), save_inv = zeros(C);

    const Tensor y = layer->forward(x, true);
    const Tensor dx = layer->backward(dy);
    gpu::batchnorm_forward_training(*ctx_, s, 0.2, 1e-5, gx.as<float>(), gscale.as<float>(), goffset.as<float>(),
                                    gy.as<float>(), gmean.as<float>(), gvar.as<float>(), save_mean.as<float>(),
                                    save_inv.as<float>());
    gpu::batchnorm_backward_training(*ctx_, s, 1e-5, gx.as<float>(), gdy.as<float>(), gscale.as<float>(),
                                     save_mean.as<float>(), save_inv.as<float>(), gdx.as<float>(), gds.as<float>(),
                                     gdo.as<float>());
    compare(down(gy, xs), y, 1e-4, "training y");
    compare(down(gmean, {C}), *buffers[0].second, 1e-4, "running mean");
    compare(down(gvar, {C}), *buffers[1].second, 1e-4, "running variance (unbiased)");
    compare(down(gdx, xs), dx, 1e-4, "training dx");
    compare(down(gds, {C}), params[0]->grad, 1e-4, "dscale");
    compare(down(gdo, {C}), params[1]->grad, 1e-4, "doffset");

    // Inference with the running statistics both sides just updated.
    const Tensor yi = layer->forward(x, false);
    const Tensor dxi = layer->backward(dy);
    gpu::batchnorm_forward_inference(*ctx_, s, 1e-5, gx.as<float>(), gscale.as<float>(), goffset.as<float>(),
                                     gmean.as<float>(), gvar.as<float>(), gy.as<float>());
    gpu::batchnorm_backward_inference(*ctx_, s, 1e-5, gx.as<float>(), gdy.as<float>(), gscale.as<float>(),
                                      gmean.as<float>(), gvar.as<float>(), gdx.as<float>(), gds.as<float>(),
                                      gdo.as<float>());
    compare(down(gy, xs), yi, 1e-4, "inference y");
    compare(down(gdx, xs), dxi, 1e-4, "inference dx");
    compare(down(gds, {C}), params[0]->grad, 1e-4, "inference dscale");
    compare(down(gdo, {C}), params[1]->grad, 1e-4, "inference doffset");
  }
}

// ---------------------------------------------------------------- dropout (statistics)
TEST_F(LayerGpu, DropoutMasksHaveTheRightStatistics) {
  const double rate = 0.3;
  const std::int64_t n = 1 << 20;
  Rng rng(2);
  const Tensor x = uniform({n}, rng, 1, 2);  // never 0, so a 0 in y is a dropped unit
  const Tensor dy = uniform({n}, rng, 1, 2);
  DeviceBuffer gx = up(x), gdy = up(dy), gy = zeros(n), gdx = zeros(n), gy2 = zeros(n);
  gpu::dropout_forward(*ctx_, rate, 42, 1000, gx.as<float>(), gy.as<float>(), n);
  gpu::dropout_backward(*ctx_, rate, 42, 1000, gdy.as<float>(), gdx.as<float>(), n);
  const Tensor y = down(gy, {n}), dx = down(gdx, {n});
  const float keep = static_cast<float>(1.0 / (1.0 - rate));
  std::int64_t dropped = 0, both = 0, other_mask = 0, misscaled = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    const bool d = y.at(i) == 0;
    dropped += d;
    if (i > 0) both += d && y.at(i - 1) == 0;
    // Kept units are scaled exactly as on the CPU, and backward applies the same mask.
    other_mask += (dx.at(i) == 0) != d;
    if (!d)
      misscaled += static_cast<float>(y.at(i)) != static_cast<float>(x.at(i)) * keep ||
                   static_cast<float>(dx.at(i)) != static_cast<float>(dy.at(i)) * keep;
  }
  EXPECT_TRUE(measured("elements where backward's mask differs from forward's", other_mask, equal_to(0)))
      << "backward must regenerate forward's mask";
  EXPECT_TRUE(measured("kept elements not scaled by 1/(1-rate) exactly", misscaled, equal_to(0)));
  // Binomial: 5 standard deviations around rate, and around rate² for neighbouring pairs.
  const double frac = static_cast<double>(dropped) / n, sigma = std::sqrt(rate * (1 - rate) / n);
  note(std::abs(frac - rate) / rate);
  EXPECT_TRUE(measured("dropped fraction", frac, near(rate, 5 * sigma)));
  const double pair = static_cast<double>(both) / (n - 1), r2 = rate * rate;
  EXPECT_TRUE(measured("neighbouring pairs both dropped", pair, near(r2, 5 * std::sqrt(r2 * (1 - r2) / (n - 1)))))
      << "neighbouring units must drop independently";
  // The CPU layer drops the same share (its masks come from another generator).
  auto cpu = build_layer("dropout rate=0.3", {n});
  const Tensor ycpu = cpu->forward(x.reshaped({1, n}), true);
  std::int64_t cpu_dropped = 0;
  for (std::int64_t i = 0; i < n; ++i) cpu_dropped += ycpu.at(i) == 0;
  EXPECT_TRUE(measured("CPU layer's dropped fraction", static_cast<double>(cpu_dropped) / n, near(frac, 10 * sigma)));

  // Another offset (the next step) or seed (another layer) gives an independent mask;
  // the same pair gives the same one.
  auto agreement = [&](std::uint64_t seed, std::uint64_t offset) {
    gpu::dropout_forward(*ctx_, rate, seed, offset, gx.as<float>(), gy2.as<float>(), n);
    const Tensor other = down(gy2, {n});
    std::int64_t same_drop = 0;
    for (std::int64_t i = 0; i < n; ++i) same_drop += other.at(i) == 0 && y.at(i) == 0;
    return static_cast<double>(same_drop) / n;
  };
  const Bound independent = near(r2, 5 * std::sqrt(r2 * (1 - r2) / n));
  EXPECT_TRUE(measured("dropped in both, same seed and offset", agreement(42, 1000), equal_to(frac)));
  EXPECT_TRUE(measured("dropped in both, next offset", agreement(42, 1000 + n), independent));
  EXPECT_TRUE(measured("dropped in both, other seed", agreement(43, 1000), independent));
  // rate 0 is the identity.
  gpu::dropout_forward(*ctx_, 0.0, 42, 0, gx.as<float>(), gy2.as<float>(), n);
  compare(down(gy2, {n}), x, 0.0, "dropout rate=0");
}

// ---------------------------------------------------------------- allocator on the device
TEST_F(LayerGpu, DeviceAllocatorReusesBlocksAcrossSteps) {
  CachingAllocator& a = ctx_->allocator();
  a.empty_cache();
  auto one_step = [&] {
    DeviceBuffer x = ctx_->alloc(64 * 784 * 4), h = ctx_->alloc(64 * 128 * 4), y = ctx_->alloc(64 * 10 * 4);
    ctx_->zero(x.get(), x.bytes());
    ctx_->zero(h.get(), h.bytes());
    ctx_->zero(y.get(), y.bytes());
  };
  one_step();
  const std::int64_t warm = a.stats().backing_allocations;
  for (int i = 0; i < 5; ++i) one_step();
  ctx_->synchronize();
  EXPECT_TRUE(measured("backing allocations after 5 more steps", a.stats().backing_allocations, equal_to(warm)))
      << "no cudaMalloc after the first step";
  EXPECT_TRUE(measured("cache hits", a.stats().cache_hits, at_least(15)));
  DeviceBuffer pinned(ctx_->pinned_allocator(), 1 << 20);
  EXPECT_NE(pinned.get(), nullptr);
}

}  // namespace
}  // namespace dlscale
