// Learning-rate schedules at hand-picked iterations, warm-up on each of
// them, and every option check.
#include "runtime/training/lr_schedule.h"

#include <gtest/gtest.h>

#include "expect_error.h"

#include <cmath>
#include <numbers>
#include <string>

#include "runtime/core/error.h"

namespace dlscale {
namespace {

using testing::expect_error;

ScheduleOptions with(const std::string& schedule, double initial) {
  ScheduleOptions o;
  o.schedule = schedule;
  o.initial_learn_rate = initial;
  return o;
}

TEST(LearnRateSchedule, NoneIsConstant) {
  LearnRateSchedule s(with("none", 0.01), 10, 5);
  EXPECT_EQ(s.rate(0), 0.01);
  EXPECT_EQ(s.rate(49), 0.01);
  EXPECT_EQ(s.rate(1000), 0.01);  // past max epochs too
}

TEST(LearnRateSchedule, PiecewiseDropsEveryPeriodOfEpochs) {
  ScheduleOptions o = with("piecewise", 0.1);
  o.drop_factor = 0.5;
  o.drop_period = 2;
  LearnRateSchedule s(o, 10, 10);  // 10 iterations per epoch
  EXPECT_DOUBLE_EQ(s.rate(0), 0.1);
  EXPECT_DOUBLE_EQ(s.rate(19), 0.1);   // epoch 1
  EXPECT_DOUBLE_EQ(s.rate(20), 0.05);  // epoch 2: first drop
  EXPECT_DOUBLE_EQ(s.rate(39), 0.05);  // epoch 3
  EXPECT_DOUBLE_EQ(s.rate(40), 0.025);
  EXPECT_DOUBLE_EQ(s.rate(99), 0.00625);  // epoch 9: four drops
}

TEST(LearnRateSchedule, PiecewiseWithDropFactorZeroStopsLearning) {
  ScheduleOptions o = with("piecewise", 0.1);
  o.drop_factor = 0.0;
  o.drop_period = 1;
  LearnRateSchedule s(o, 5, 3);
  EXPECT_EQ(s.rate(4), 0.1);
  EXPECT_EQ(s.rate(5), 0.0);
}

TEST(LearnRateSchedule, CosineFallsFromInitialToMinOverTheRun) {
  ScheduleOptions o = with("cosine", 0.1);
  o.min_learn_rate = 0.01;
  LearnRateSchedule s(o, 10, 10);  // 100 iterations
  EXPECT_DOUBLE_EQ(s.rate(0), 0.1);
  EXPECT_NEAR(s.rate(25), 0.01 + 0.045 * (1 + std::numbers::sqrt2 / 2), 1e-15);  // 0.0868198
  EXPECT_NEAR(s.rate(25), 0.0868198, 1e-7);
  EXPECT_NEAR(s.rate(50), 0.055, 1e-15);
  EXPECT_NEAR(s.rate(100), 0.01, 1e-15);
  EXPECT_NEAR(s.rate(250), 0.01, 1e-15);  // stays at the floor after the run
  for (std::int64_t i = 1; i < 100; ++i) EXPECT_LT(s.rate(i), s.rate(i - 1)) << "iteration " << i;
}

TEST(LearnRateSchedule, WarmupRampsLinearlyToTheBaseRate) {
  ScheduleOptions o = with("none", 0.1);
  o.warmup_iterations = 4;
  LearnRateSchedule s(o, 10, 1);
  EXPECT_DOUBLE_EQ(s.rate(0), 0.025);
  EXPECT_DOUBLE_EQ(s.rate(1), 0.05);
  EXPECT_DOUBLE_EQ(s.rate(2), 0.075);
  EXPECT_DOUBLE_EQ(s.rate(3), 0.1);
  EXPECT_DOUBLE_EQ(s.rate(4), 0.1);
}

TEST(LearnRateSchedule, CosineStartsAfterWarmup) {
  ScheduleOptions o = with("cosine", 0.1);
  o.warmup_iterations = 20;
  LearnRateSchedule s(o, 10, 10);  // cosine spans iterations 20..100
  EXPECT_DOUBLE_EQ(s.rate(0), 0.005);
  EXPECT_DOUBLE_EQ(s.rate(9), 0.05);
  EXPECT_DOUBLE_EQ(s.rate(19), 0.1);
  EXPECT_DOUBLE_EQ(s.rate(20), 0.1);
  EXPECT_NEAR(s.rate(60), 0.05, 1e-15);
  EXPECT_NEAR(s.rate(100), 0.0, 1e-15);
}

TEST(LearnRateSchedule, WarmupScalesThePiecewiseRate) {
  ScheduleOptions o = with("piecewise", 0.1);
  o.drop_factor = 0.5;
  o.drop_period = 1;
  o.warmup_iterations = 15;
  LearnRateSchedule s(o, 10, 5);
  EXPECT_DOUBLE_EQ(s.rate(4), 0.1 * 5 / 15);
  EXPECT_DOUBLE_EQ(s.rate(12), 0.05 * 13 / 15);  // epoch 1 has dropped already
  EXPECT_DOUBLE_EQ(s.rate(15), 0.05);
}

TEST(LearnRateSchedule, CosineRunShorterThanWarmupNeverDecays) {
  ScheduleOptions o = with("cosine", 0.1);
  o.warmup_iterations = 50;
  LearnRateSchedule s(o, 10, 2);  // 20 iterations, all inside the warm-up
  EXPECT_DOUBLE_EQ(s.rate(0), 0.1 / 50);
  EXPECT_DOUBLE_EQ(s.rate(19), 0.1 * 20 / 50);
  EXPECT_DOUBLE_EQ(s.rate(60), 0.1);
}

TEST(LearnRateSchedule, NegativeIterationThrows) {
  LearnRateSchedule s(with("none", 0.1), 10, 1);
  expect_error([&] { (void)s.rate(-1); }, "negative iteration -1");
}

TEST(LearnRateSchedule, RejectsEveryInvalidOption) {
  auto make = [](auto change, std::int64_t per_epoch = 10, int epochs = 5) {
    ScheduleOptions o;
    change(o);
    return [o, per_epoch, epochs] { LearnRateSchedule s(o, per_epoch, epochs); };
  };
  auto same = [](ScheduleOptions&) {};
  expect_error(make([](ScheduleOptions& o) { o.initial_learn_rate = 0.0; }),
               "initial-learn-rate must be a finite number > 0, got 0");
  expect_error(make([](ScheduleOptions& o) { o.initial_learn_rate = -0.1; }), "initial-learn-rate");
  expect_error(make([](ScheduleOptions& o) { o.initial_learn_rate = std::nan(""); }), "initial-learn-rate");
  expect_error(make([](ScheduleOptions& o) { o.schedule = "step"; }),
               "unknown learn-rate-schedule 'step' (expected none, piecewise or cosine)");
  expect_error(make([](ScheduleOptions& o) { o.drop_factor = 1.5; }),
               "learn-rate-drop-factor must be in [0, 1], got 1.5");
  expect_error(make([](ScheduleOptions& o) { o.drop_factor = -0.1; }), "learn-rate-drop-factor");
  expect_error(make([](ScheduleOptions& o) { o.drop_period = 0; }), "learn-rate-drop-period must be >= 1");
  expect_error(make([](ScheduleOptions& o) { o.min_learn_rate = -1e-3; }), "min-learn-rate must be in [0,");
  expect_error(make([](ScheduleOptions& o) { o.min_learn_rate = 0.5; }),
               "min-learn-rate must be in [0, initial-learn-rate 0.01], got 0.5");
  expect_error(make([](ScheduleOptions& o) { o.warmup_iterations = -1; }), "warmup-iterations must be >= 0");
  expect_error(make(same, 10, 0), "max-epochs must be >= 1, got 0");
  expect_error(make(same, 0, 5), "an epoch must have at least one iteration");
}

TEST(LearnRateSchedule, AcceptsBoundaryValues) {
  ScheduleOptions o = with("piecewise", 1e-9);
  o.drop_factor = 1.0;
  o.drop_period = 1;
  o.min_learn_rate = 1e-9;  // equal to the initial rate
  EXPECT_NO_THROW(LearnRateSchedule(o, 1, 1));
  o.drop_factor = 0.0;
  EXPECT_NO_THROW(LearnRateSchedule(o, 1, 1));
}

}  // namespace
}  // namespace dlscale
