// Dynamic loss scaling: unscale, overflow check, skip and back off, grow.
#include "runtime/training/loss_scaler.h"

#include <cmath>
#include <cstdio>

#include "runtime/core/error.h"

namespace dlscale {

namespace {

// Divides by the scale and reports whether every element is finite; one pass
// over the gradients instead of a separate check.
bool unscale_all_finite(const std::vector<Param*>& params, double inverse_scale) {
  bool finite = true;
  for (Param* p : params)
    dispatch(p->grad.dtype(), [&]<class T>() {
      T* g = p->grad.data<T>();
      const T f = static_cast<T>(inverse_scale);
      const std::int64_t n = p->grad.numel();
      bool ok = true;
#pragma omp parallel for reduction(&& : ok) schedule(static)
      for (std::int64_t i = 0; i < n; ++i) {
        g[i] *= f;
        ok = ok && std::isfinite(g[i]);
      }
      finite = finite && ok;
    });
  return finite;
}

std::string format_scale(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", s);
  return buf;
}

}  // namespace

void validate(const LossScaleOptions& o) {
  if (o.mode != "auto" && o.mode != "none" && o.mode != "dynamic")
    fail("loss-scaling must be auto, none or dynamic, not '" + o.mode + "'");
  if (!(o.initial_scale > 0) || !std::isfinite(o.initial_scale))
    fail("initial-loss-scale must be a positive finite number, not " + format_scale(o.initial_scale));
  if (o.growth_interval < 1)
    fail("loss-scale-growth-interval must be at least 1, not " + std::to_string(o.growth_interval));
}

bool loss_scaling_enabled(const LossScaleOptions& o, const std::string& half_type) {
  if (o.mode == "auto") return half_type == "fp16";
  return o.mode == "dynamic";
}

bool LossScaler::unscale_or_skip(const std::vector<Param*>& params, bool local_loss_finite, std::int64_t iteration,
                                 Communicator& comm) {
  return decide(unscale_all_finite(params, 1.0 / state_.scale), local_loss_finite, iteration, comm);
}

bool LossScaler::decide(bool grads_finite, bool local_loss_finite, std::int64_t iteration, Communicator& comm) {
  // The summed gradients are the same on every rank, but the loss is not:
  // one max keeps the decision common.
  const bool overflow = comm.allreduce_max((grads_finite && local_loss_finite) ? 0.0 : 1.0) > 0;
  if (!overflow) {
    state_.skips_in_a_row = 0;
    if (++state_.good_steps >= options_.growth_interval) {
      state_.scale *= options_.growth_factor;
      state_.good_steps = 0;
    }
    return true;
  }
  ++state_.skipped_steps, ++state_.skips_in_a_row;
  state_.good_steps = 0;
  if (state_.skips_in_a_row >= options_.max_skips_in_a_row)
    fail("the gradients were NaN or infinite in " + std::to_string(state_.skips_in_a_row) +
         " steps in a row up to iteration " + std::to_string(iteration) + " although the loss scale fell to " +
         format_scale(state_.scale) + "; the loss or the weights diverged: lower initial-learn-rate or set "
         "gradient-threshold");
  state_.scale *= options_.backoff_factor;
  return false;
}

}  // namespace dlscale
