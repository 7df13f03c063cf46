// Learning-rate schedules as functions of the global iteration, so a resumed
// run gets the same rate from the iteration number alone.
#include "runtime/training/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <sstream>

#include "runtime/core/error.h"

namespace dlscale {

namespace {
std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}
}  // namespace

LearnRateSchedule::LearnRateSchedule(ScheduleOptions options, std::int64_t iterations_per_epoch, int max_epochs)
    : options_(std::move(options)), iterations_per_epoch_(iterations_per_epoch), max_epochs_(max_epochs) {
  const ScheduleOptions& o = options_;
  // Comparisons are written so that NaN fails them.
  if (!(o.initial_learn_rate > 0.0 && std::isfinite(o.initial_learn_rate)))
    fail("initial-learn-rate must be a finite number > 0, got " + number(o.initial_learn_rate));
  if (o.schedule != "none" && o.schedule != "piecewise" && o.schedule != "cosine")
    fail("unknown learn-rate-schedule '" + o.schedule + "' (expected none, piecewise or cosine)");
  if (!(o.drop_factor >= 0.0 && o.drop_factor <= 1.0))
    fail("learn-rate-drop-factor must be in [0, 1], got " + number(o.drop_factor));
  if (o.drop_period < 1) fail("learn-rate-drop-period must be >= 1 epoch, got " + std::to_string(o.drop_period));
  if (!(o.min_learn_rate >= 0.0 && o.min_learn_rate <= o.initial_learn_rate))
    fail("min-learn-rate must be in [0, initial-learn-rate " + number(o.initial_learn_rate) + "], got " +
         number(o.min_learn_rate));
  if (o.warmup_iterations < 0)
    fail("warmup-iterations must be >= 0, got " + std::to_string(o.warmup_iterations));
  if (max_epochs_ < 1) fail("max-epochs must be >= 1, got " + std::to_string(max_epochs_));
  if (iterations_per_epoch_ < 1)
    fail("an epoch must have at least one iteration (is the training set smaller than one minibatch?), got " +
         std::to_string(iterations_per_epoch_));
}

double LearnRateSchedule::rate(std::int64_t iteration) const {
  DLSCALE_REQUIRE(iteration >= 0, "learning rate asked for negative iteration " + std::to_string(iteration));
  const ScheduleOptions& o = options_;
  double base = o.initial_learn_rate;
  if (o.schedule == "piecewise") {
    const std::int64_t epoch = iteration / iterations_per_epoch_;
    base = o.initial_learn_rate * std::pow(o.drop_factor, static_cast<double>(epoch / o.drop_period));
  } else if (o.schedule == "cosine") {
    // The cosine starts after the warm-up and spans the rest of the run; a
    // run that ends inside its warm-up never decays (span <= 0).
    const std::int64_t span = static_cast<std::int64_t>(max_epochs_) * iterations_per_epoch_ - o.warmup_iterations;
    if (span > 0) {
      const double t = static_cast<double>(std::clamp<std::int64_t>(iteration - o.warmup_iterations, 0, span));
      const double c = (1.0 + std::cos(std::numbers::pi * t / static_cast<double>(span))) / 2.0;
      base = o.min_learn_rate + (o.initial_learn_rate - o.min_learn_rate) * c;
    }
  }
  if (iteration < o.warmup_iterations)
    base *= static_cast<double>(iteration + 1) / static_cast<double>(o.warmup_iterations);
  return base;
}

}  // namespace dlscale
