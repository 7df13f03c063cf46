// Learning-rate schedules: none, piecewise (drop by a factor every N epochs)
// and cosine (to a floor over the whole run), each with optional linear warm-up.
#pragma once

#include <cstdint>
#include <string>

namespace dlscale {

struct ScheduleOptions {
  double initial_learn_rate = 0.01;
  std::string schedule = "none";  // none | piecewise | cosine
  double drop_factor = 0.1;       // piecewise
  int drop_period = 10;           // piecewise, in epochs
  double min_learn_rate = 0.0;    // cosine floor
  std::int64_t warmup_iterations = 0;  // linear ramp from initial/warmup to initial
};

class LearnRateSchedule {
 public:
  // Throws naming the option when a value is invalid.
  LearnRateSchedule(ScheduleOptions options, std::int64_t iterations_per_epoch, int max_epochs);
  // Rate for 0-based global iteration `iteration`.
  double rate(std::int64_t iteration) const;

 private:
  ScheduleOptions options_;
  std::int64_t iterations_per_epoch_;
  int max_epochs_;
};

}  // namespace dlscale
