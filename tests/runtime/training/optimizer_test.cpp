// Optimizers: the first two steps of each solver against hand-worked numbers,
// float32 against float64, L2 regularization, both clipping methods, state
// for checkpoints, convergence on a convex quadratic and every option check.
#include "runtime/training/optimizer.h"

#include <gtest/gtest.h>

#include "expect_error.h"

#include <cmath>
#include <string>
#include <vector>

namespace dlscale {
namespace {

using testing::expect_error;

Param make_param(const std::vector<double>& w, DType dtype = DType::f64, bool regularize = true) {
  Param p;
  p.name = "weight";
  p.value = Tensor({static_cast<std::int64_t>(w.size())}, dtype);
  p.grad = Tensor(p.value.shape(), dtype);
  for (std::size_t i = 0; i < w.size(); ++i) p.value.set(static_cast<std::int64_t>(i), w[i]);
  p.regularize = regularize;
  return p;
}

void set_grad(Param& p, const std::vector<double>& g) {
  for (std::size_t i = 0; i < g.size(); ++i) p.grad.set(static_cast<std::int64_t>(i), g[i]);
}

SolverOptions plain(const std::string& solver) {
  SolverOptions o;
  o.solver = solver;
  o.l2_regularization = 0.0;  // the hand numbers below leave L2 out
  return o;
}

// The two gradients every hand-worked case uses, on w = [1, -2], lr = 0.1.
const std::vector<double> kG1 = {0.5, 1.0}, kG2 = {0.25, -0.5};

void run_two_steps(Optimizer& opt, Param& p) {
  set_grad(p, kG1);
  opt.step({&p}, 0.1);
  set_grad(p, kG2);
  opt.step({&p}, 0.1);
}

TEST(Sgdm, FirstTwoStepsByHand) {
  SolverOptions o = plain("sgdm");
  o.momentum = 0.9;
  auto opt = make_optimizer(o);
  Param p = make_param({1.0, -2.0});
  set_grad(p, kG1);
  opt->step({&p}, 0.1);
  // v = -0.1 g1 = [-0.05, -0.1]
  EXPECT_NEAR(p.value.at(0), 0.95, 1e-15);
  EXPECT_NEAR(p.value.at(1), -2.1, 1e-15);
  set_grad(p, kG2);
  opt->step({&p}, 0.1);
  // v = 0.9 [-0.05, -0.1] - 0.1 [0.25, -0.5] = [-0.07, -0.04]
  EXPECT_NEAR(p.value.at(0), 0.88, 1e-15);
  EXPECT_NEAR(p.value.at(1), -2.14, 1e-15);
  auto state = opt->state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "param0.velocity");
  EXPECT_NEAR(state[0].second->at(0), -0.07, 1e-15);
  EXPECT_NEAR(state[0].second->at(1), -0.04, 1e-15);
}

TEST(Adam, FirstTwoStepsByHand) {
  SolverOptions o = plain("adam");
  o.gradient_decay = 0.9;
  o.squared_gradient_decay = 0.999;
  o.epsilon = 1e-8;
  auto opt = make_optimizer(o);
  Param p = make_param({1.0, -2.0});
  set_grad(p, kG1);
  opt->step({&p}, 0.1);
  // m = [0.05, 0.1], v = [0.00025, 0.001]; mhat = [0.5, 1], vhat = [0.25, 1]
  const double w0 = 1.0 - 0.1 * 0.5 / (0.5 + 1e-8), w1 = -2.0 - 0.1 * 1.0 / (1.0 + 1e-8);
  EXPECT_NEAR(p.value.at(0), w0, 1e-14);
  EXPECT_NEAR(p.value.at(1), w1, 1e-14);
  set_grad(p, kG2);
  opt->step({&p}, 0.1);
  // m = [0.07, 0.04], v = [0.00031225, 0.001249]; 1-b1^2 = 0.19, 1-b2^2 = 0.001999
  EXPECT_NEAR(p.value.at(0), w0 - 0.1 * (0.07 / 0.19) / (std::sqrt(0.00031225 / 0.001999) + 1e-8), 1e-14);
  EXPECT_NEAR(p.value.at(1), w1 - 0.1 * (0.04 / 0.19) / (std::sqrt(0.001249 / 0.001999) + 1e-8), 1e-14);
  // Hand-rounded: 0.9 - 0.1*0.368421/0.395225 = 0.806782
  EXPECT_NEAR(p.value.at(0), 0.806782, 1e-6);

  auto state = opt->state();
  ASSERT_EQ(state.size(), 3u);
  EXPECT_EQ(state[0].first, "step");
  EXPECT_EQ(state[0].second->dtype(), DType::f64);
  EXPECT_EQ(state[0].second->numel(), 1);
  EXPECT_EQ(state[0].second->at(0), 2.0);
  EXPECT_EQ(state[1].first, "param0.average_grad");
  EXPECT_NEAR(state[1].second->at(0), 0.07, 1e-15);
  EXPECT_EQ(state[2].first, "param0.average_sq_grad");
  EXPECT_NEAR(state[2].second->at(1), 0.001249, 1e-15);
}

TEST(RmsProp, FirstTwoStepsByHand) {
  SolverOptions o = plain("rmsprop");
  o.squared_gradient_decay = 0.9;  // what the trainer passes for rmsprop
  o.epsilon = 1e-8;
  auto opt = make_optimizer(o);
  Param p = make_param({1.0, -2.0});
  set_grad(p, kG1);
  opt->step({&p}, 0.1);
  // v = 0.1 g^2 = [0.025, 0.1]; both steps are 0.1*|g|/sqrt(0.1 g^2) = 1/sqrt(10)
  const double w0 = 1.0 - 0.1 * 0.5 / (std::sqrt(0.025) + 1e-8), w1 = -2.0 - 0.1 * 1.0 / (std::sqrt(0.1) + 1e-8);
  EXPECT_NEAR(p.value.at(0), w0, 1e-14);
  EXPECT_NEAR(p.value.at(1), w1, 1e-14);
  EXPECT_NEAR(p.value.at(0), 1.0 - 0.316228, 1e-6);
  set_grad(p, kG2);
  opt->step({&p}, 0.1);
  // v = 0.9 [0.025, 0.1] + 0.1 [0.0625, 0.25] = [0.02875, 0.115]
  EXPECT_NEAR(p.value.at(0), w0 - 0.1 * 0.25 / (std::sqrt(0.02875) + 1e-8), 1e-14);
  EXPECT_NEAR(p.value.at(1), w1 + 0.1 * 0.5 / (std::sqrt(0.115) + 1e-8), 1e-14);
  auto state = opt->state();
  ASSERT_EQ(state.size(), 1u);
  EXPECT_EQ(state[0].first, "param0.average_sq_grad");
  EXPECT_NEAR(state[0].second->at(0), 0.02875, 1e-15);
}

class EverySolver : public ::testing::TestWithParam<std::string> {};

TEST_P(EverySolver, Float32MatchesFloat64) {
  SolverOptions o = plain(GetParam());
  o.l2_regularization = 0.01;
  o.gradient_threshold = 0.8;  // clips some of the steps below
  Param p64 = make_param({1.0, -2.0, 0.25}), p32 = make_param({1.0, -2.0, 0.25}, DType::f32);
  auto opt64 = make_optimizer(o), opt32 = make_optimizer(o);
  for (int k = 0; k < 5; ++k) {
    const std::vector<double> g = {0.5 - 0.2 * k, 1.0 / (k + 1), -0.3 * k};
    set_grad(p64, g);
    set_grad(p32, g);
    opt64->step({&p64}, 0.05);
    opt32->step({&p32}, 0.05);
  }
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(p32.value.at(i), p64.value.at(i), 1e-6) << "element " << i;
  auto s64 = opt64->state(), s32 = opt32->state();
  ASSERT_EQ(s64.size(), s32.size());
  for (std::size_t k = 0; k < s64.size(); ++k) {
    EXPECT_EQ(s32[k].first, s64[k].first);
    for (std::int64_t i = 0; i < s64[k].second->numel(); ++i)
      EXPECT_NEAR(s32[k].second->at(i), s64[k].second->at(i), 1e-6) << s64[k].first;
  }
}

// f(w) = 1/2 sum a_i (w_i - c_i)^2 is convex with its minimum 0 at w = c.
TEST_P(EverySolver, MinimizesAConvexQuadratic) {
  const std::vector<double> a = {1.0, 4.0, 0.5}, c = {3.0, -1.0, 2.0};
  auto loss = [&](const Param& p) {
    double f = 0;
    for (int i = 0; i < 3; ++i) f += 0.5 * a[i] * (p.value.at(i) - c[i]) * (p.value.at(i) - c[i]);
    return f;
  };
  SolverOptions o = plain(GetParam());
  if (o.solver == "rmsprop") o.squared_gradient_decay = 0.9;
  auto opt = make_optimizer(o);
  Param p = make_param({0.0, 0.0, 0.0});
  const double start = loss(p);
  const int steps = 600;
  for (int k = 0; k < steps; ++k) {
    for (int i = 0; i < 3; ++i) p.grad.set(i, a[i] * (p.value.at(i) - c[i]));
    // Decaying the rate lets adam and rmsprop, whose steps stay near lr in
    // size, settle instead of circling the minimum.
    opt->step({&p}, 0.1 * (1.0 - static_cast<double>(k) / steps));
  }
  EXPECT_LT(loss(p), 1e-6 * start) << "start " << start;
}

TEST_P(EverySolver, StateIsEmptyUntilTheFirstStepThenFixed) {
  auto opt = make_optimizer(plain(GetParam()));
  EXPECT_TRUE(opt->state().empty());
  Param a = make_param({1.0, 2.0}), b = make_param({3.0});
  opt->step({&a, &b}, 0.1);
  auto first = opt->state();
  ASSERT_FALSE(first.empty());
  opt->step({&a, &b}, 0.1);
  auto second = opt->state();
  ASSERT_EQ(first.size(), second.size());
  for (std::size_t k = 0; k < first.size(); ++k) {
    EXPECT_EQ(first[k].first, second[k].first);
    EXPECT_EQ(first[k].second, second[k].second);  // the same tensors, updated in place
  }
  // Per-parameter names come in parameter order, param1 after param0.
  EXPECT_NE(first.back().first.find("param1."), std::string::npos);
}

// A checkpoint restores state into a fresh optimizer (prepare, then copy)
// and the next step must be the one the original would have taken.
TEST_P(EverySolver, RestoredStateContinuesTheSameRun) {
  auto original = make_optimizer(plain(GetParam()));
  Param p = make_param({1.0, -2.0});
  run_two_steps(*original, p);

  auto restored = make_optimizer(plain(GetParam()));
  Param q = make_param({p.value.at(0), p.value.at(1)});
  restored->prepare({&q});
  auto from = original->state(), to = restored->state();
  ASSERT_EQ(from.size(), to.size());
  for (std::size_t k = 0; k < from.size(); ++k) {
    EXPECT_EQ(from[k].first, to[k].first);
    to[k].second->copy_from(*from[k].second);
  }
  set_grad(p, {0.3, 0.7});
  set_grad(q, {0.3, 0.7});
  original->step({&p}, 0.1);
  restored->step({&q}, 0.1);
  EXPECT_EQ(q.value.at(0), p.value.at(0));
  EXPECT_EQ(q.value.at(1), p.value.at(1));
}

TEST_P(EverySolver, RefusesParamsThatDoNotMatchItsState) {
  auto opt = make_optimizer(plain(GetParam()));
  Param a = make_param({1.0, 2.0}), b = make_param({3.0});
  opt->step({&a}, 0.1);
  expect_error([&] { opt->step({&a, &b}, 0.1); }, "optimizer state was made for 1 parameters but got 2");
  expect_error([&] { opt->step({&b}, 0.1); }, "optimizer state of parameter 0 ('weight') is float64 2");
  Param wide = make_param({1.0, 2.0}, DType::f32);
  expect_error([&] { opt->step({&wide}, 0.1); }, "is float64 2 but the parameter is float32 2");
}

// Above the OpenMP threshold the loops run in parallel; every element must
// still follow the scalar rule.
TEST_P(EverySolver, LargeTensorsFollowTheSameRule) {
  const std::int64_t n = 100000;
  Param big;
  big.value = Tensor({n}, DType::f64);
  big.grad = Tensor({n}, DType::f64);
  for (std::int64_t i = 0; i < n; ++i) {
    big.value.set(i, 1.0);
    big.grad.set(i, 0.5);
  }
  Param small = make_param({1.0});
  set_grad(small, {0.5});
  auto opt_big = make_optimizer(plain(GetParam())), opt_small = make_optimizer(plain(GetParam()));
  opt_big->step({&big}, 0.1);
  opt_small->step({&small}, 0.1);
  for (std::int64_t i = 0; i < n; i += 997) ASSERT_EQ(big.value.at(i), small.value.at(0)) << "element " << i;
  EXPECT_EQ(big.value.at(n - 1), small.value.at(0));
}

INSTANTIATE_TEST_SUITE_P(Solvers, EverySolver, ::testing::Values("sgdm", "adam", "rmsprop"));

TEST(Regularization, AddsL2OnlyToRegularizedParams) {
  SolverOptions o = plain("sgdm");
  o.momentum = 0.0;
  o.l2_regularization = 0.5;
  auto opt = make_optimizer(o);
  Param weight = make_param({2.0, -4.0}, DType::f64, true);
  Param bias = make_param({2.0, -4.0}, DType::f64, false);
  set_grad(weight, {0.0, 1.0});
  set_grad(bias, {0.0, 1.0});
  opt->step({&weight, &bias}, 0.1);
  // weight: g = [0, 1] + 0.5 [2, -4] = [1, -1]; w = [2, -4] - 0.1 g
  EXPECT_DOUBLE_EQ(weight.grad.at(0), 1.0);
  EXPECT_DOUBLE_EQ(weight.grad.at(1), -1.0);
  EXPECT_DOUBLE_EQ(weight.value.at(0), 1.9);
  EXPECT_DOUBLE_EQ(weight.value.at(1), -3.9);
  // bias: untouched gradient
  EXPECT_DOUBLE_EQ(bias.grad.at(0), 0.0);
  EXPECT_DOUBLE_EQ(bias.grad.at(1), 1.0);
  EXPECT_DOUBLE_EQ(bias.value.at(0), 2.0);
  EXPECT_DOUBLE_EQ(bias.value.at(1), -4.1);
}

TEST(Clipping, L2NormScalesEachParamOnItsOwn) {
  Param a = make_param({0.0, 0.0}), b = make_param({0.0, 0.0});
  set_grad(a, {3.0, 4.0});  // norm 5
  set_grad(b, {0.6, 0.8});  // norm 1
  EXPECT_DOUBLE_EQ(clip_gradients({&a, &b}, 2.0, "l2norm"), 5.0);
  EXPECT_DOUBLE_EQ(a.grad.at(0), 1.2);
  EXPECT_DOUBLE_EQ(a.grad.at(1), 1.6);
  EXPECT_DOUBLE_EQ(b.grad.at(0), 0.6);
  EXPECT_DOUBLE_EQ(b.grad.at(1), 0.8);
}

TEST(Clipping, GlobalL2NormScalesAllParamsTogether) {
  Param a = make_param({0.0, 0.0}), b = make_param({0.0, 0.0});
  set_grad(a, {3.0, 4.0});
  set_grad(b, {0.0, 12.0});  // global norm sqrt(9 + 16 + 144) = 13
  EXPECT_DOUBLE_EQ(clip_gradients({&a, &b}, 6.5, "global-l2norm"), 13.0);
  EXPECT_DOUBLE_EQ(a.grad.at(0), 1.5);
  EXPECT_DOUBLE_EQ(a.grad.at(1), 2.0);
  EXPECT_DOUBLE_EQ(b.grad.at(0), 0.0);
  EXPECT_DOUBLE_EQ(b.grad.at(1), 6.0);
}

TEST(Clipping, NormsBelowTheThresholdAreLeftAlone) {
  Param a = make_param({0.0, 0.0}, DType::f32);
  set_grad(a, {3.0, 4.0});
  EXPECT_DOUBLE_EQ(clip_gradients({&a}, 5.0, "l2norm"), 5.0);
  EXPECT_DOUBLE_EQ(clip_gradients({&a}, 5.0, "global-l2norm"), 5.0);
  EXPECT_EQ(a.grad.at(0), 3.0);
  EXPECT_EQ(a.grad.at(1), 4.0);
}

TEST(Clipping, StepClipsAfterAddingL2) {
  SolverOptions o = plain("sgdm");
  o.momentum = 0.0;
  o.l2_regularization = 1.0;
  o.gradient_threshold = 2.5;
  o.gradient_threshold_method = "global-l2norm";
  auto opt = make_optimizer(o);
  Param p = make_param({1.0, 1.0});
  set_grad(p, {2.0, 3.0});  // + w = [3, 4], norm 5, clipped to [1.5, 2]
  opt->step({&p}, 1.0);
  EXPECT_DOUBLE_EQ(p.value.at(0), -0.5);
  EXPECT_DOUBLE_EQ(p.value.at(1), -1.0);
}

TEST(Clipping, RejectsUnknownMethodAndBadThreshold) {
  Param a = make_param({1.0});
  expect_error([&] { clip_gradients({&a}, 1.0, "absolute-value"); },
               "unknown gradient-threshold-method 'absolute-value' (expected l2norm or global-l2norm)");
  expect_error([&] { clip_gradients({&a}, 0.0, "l2norm"); }, "gradient-threshold must be > 0");
}

TEST(Step, RejectsBadLearnRateAndMismatchedGradients) {
  auto opt = make_optimizer(plain("sgdm"));
  Param p = make_param({1.0, 2.0});
  expect_error([&] { opt->step({&p}, -0.1); }, "learning rate must be a finite number >= 0");
  expect_error([&] { opt->step({&p}, std::nan("")); }, "learning rate");
  Param bad = make_param({1.0, 2.0});
  bad.grad = Tensor({3}, DType::f64);
  expect_error([&] { opt->step({&bad}, 0.1); },
               "parameter 0 ('weight') has a gradient of float64 3 but a value of float64 2");
}

TEST(MakeOptimizer, RejectsEveryInvalidOption) {
  auto with = [](auto change) {
    SolverOptions o;
    change(o);
    return [o] { (void)make_optimizer(o); };
  };
  expect_error(with([](SolverOptions& o) { o.solver = "lbfgs"; }),
               "unknown solver 'lbfgs' (expected sgdm, adam or rmsprop)");
  expect_error(with([](SolverOptions& o) { o.momentum = -0.1; }), "momentum must be in [0, 1], got -0.1");
  expect_error(with([](SolverOptions& o) { o.momentum = 1.5; }), "momentum");
  expect_error(with([](SolverOptions& o) { o.gradient_decay = 1.0; }), "gradient-decay-factor must be in [0, 1)");
  expect_error(with([](SolverOptions& o) { o.gradient_decay = -0.5; }), "gradient-decay-factor");
  expect_error(with([](SolverOptions& o) { o.squared_gradient_decay = 1.0; }),
               "squared-gradient-decay-factor must be in [0, 1), got 1");
  expect_error(with([](SolverOptions& o) { o.squared_gradient_decay = std::nan(""); }),
               "squared-gradient-decay-factor");
  expect_error(with([](SolverOptions& o) { o.epsilon = 0.0; }), "epsilon must be > 0");
  expect_error(with([](SolverOptions& o) { o.epsilon = -1e-8; }), "epsilon");
  expect_error(with([](SolverOptions& o) { o.l2_regularization = -1e-4; }), "l2-regularization must be");
  expect_error(with([](SolverOptions& o) { o.gradient_threshold = 0.0; }), "gradient-threshold must be > 0");
  expect_error(with([](SolverOptions& o) { o.gradient_threshold = -1.0; }), "gradient-threshold");
  expect_error(with([](SolverOptions& o) { o.gradient_threshold_method = "absolute-value"; }),
               "unknown gradient-threshold-method 'absolute-value'");
}

TEST(MakeOptimizer, AcceptsTheDefaultsAndBoundaryValues) {
  for (const char* solver : {"sgdm", "adam", "rmsprop"}) {
    SolverOptions o;
    o.solver = solver;
    EXPECT_EQ(make_optimizer(o)->options().solver, solver);
  }
  SolverOptions edge;
  edge.momentum = 0.0;
  edge.gradient_decay = 0.0;
  edge.squared_gradient_decay = 0.0;
  edge.l2_regularization = 0.0;
  edge.gradient_threshold = 1e-12;
  edge.gradient_threshold_method = "global-l2norm";
  EXPECT_NO_THROW(make_optimizer(edge));
  edge.momentum = 1.0;
  EXPECT_NO_THROW(make_optimizer(edge));
}

}  // namespace
}  // namespace dlscale
