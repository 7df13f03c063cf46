// Dynamic loss scaling (PyTorch's GradScaler, MATLAB's automatic-mixed
// training): the loss gradient is multiplied by a scale so small half-precision
// gradients do not flush to zero; after the all-reduce the gradients are
// divided by it again. A step whose gradients hold Inf or NaN is skipped and
// the scale backs off; after `growth_interval` good steps in a row it grows.
// The scale state lives in TrainingState so checkpoints carry it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "runtime/parallel/communicator.h"

namespace dlscale {

struct LossScaleOptions {
  std::string mode = "auto";  // auto (dynamic under automatic-mixed, else none) | none | dynamic
  double initial_scale = 65536;
  double growth_factor = 2;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;  // good steps in a row before the scale grows
  int max_skips_in_a_row = 40;          // then the gradients are broken, not the scale: stop
};

struct LossScaleState {
  double scale = 1;
  std::int64_t good_steps = 0;     // finite steps since the last change of scale
  std::int64_t skipped_steps = 0;  // over the whole run
  int skips_in_a_row = 0;
};

// Throws naming the option when a value is invalid.
void validate(const LossScaleOptions& options);
// True when loss scaling applies to a run whose GPU ranks compute in
// half_type (TrainingOptions::half_type(): "" for float32): auto means
// dynamic for fp16, whose range ends at 65504; bf16 has float32's range and
// needs none (PyTorch's advice too).
bool loss_scaling_enabled(const LossScaleOptions& options, const std::string& half_type);

class LossScaler {
 public:
  LossScaler(const LossScaleOptions& options, LossScaleState& state) : options_(options), state_(state) {}

  double scale() const { return state_.scale; }

  // After the all-reduce. Collective: every rank takes the same decision.
  // true: the gradients were finite and are now unscaled, take the step.
  // false: skip this step; the scale has backed off. Throws when
  // max_skips_in_a_row steps in a row overflowed, naming the iteration.
  bool unscale_or_skip(const std::vector<Param*>& params, bool local_loss_finite, std::int64_t iteration,
                       Communicator& comm);
  // The same decision for gradients another backend has already divided by
  // scale() (the GPU's): grads_finite says whether all of them are finite.
  bool decide(bool grads_finite, bool local_loss_finite, std::int64_t iteration, Communicator& comm);

 private:
  const LossScaleOptions& options_;
  LossScaleState& state_;
};

}  // namespace dlscale
