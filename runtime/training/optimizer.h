// Solvers (sgdm, adam, rmsprop) with L2 regularization and gradient clipping,
// following MATLAB's trainingOptions semantics.
#pragma once

#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"

namespace dlscale {

struct SolverOptions {
  std::string solver = "sgdm";  // sgdm | adam | rmsprop
  double momentum = 0.9;        // sgdm
  double gradient_decay = 0.9;  // adam beta1
  double squared_gradient_decay = 0.999;  // adam beta2 (rmsprop uses it too; MATLAB's default there is 0.9)
  double epsilon = 1e-8;
  double l2_regularization = 1e-4;  // added as l2 * w to the gradient of params with regularize=true
  double gradient_threshold = std::numeric_limits<double>::infinity();
  std::string gradient_threshold_method = "l2norm";  // l2norm (per parameter) | global-l2norm
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // One update of every param from its grad: applies L2, then clipping,
  // then the solver rule with the given learning rate. Grads are modified.
  void step(const std::vector<Param*>& params, double learn_rate);
  // Solver state (velocities, moments, step count) for checkpoints, in a
  // fixed order; the tensors are created by prepare() or the first step.
  virtual std::vector<std::pair<std::string, Tensor*>> state() = 0;
  // Creates the zeroed state for these params if it does not exist yet, so a
  // checkpoint can be read into state() before the first step. Later calls
  // (and step) throw if the params no longer match in count, shape or dtype.
  void prepare(const std::vector<Param*>& params);

  const SolverOptions& options() const { return options_; }

 protected:
  explicit Optimizer(SolverOptions options) : options_(std::move(options)) {}
  // Called once, from prepare(), with params already checked.
  virtual void create_state(const std::vector<Param*>& params) = 0;
  virtual void update(const std::vector<Param*>& params, double learn_rate) = 0;
  SolverOptions options_;

 private:
  std::vector<std::pair<Shape, DType>> layout_;  // of the params the state was made for
  bool prepared_ = false;
};

// Throws naming the option (by its command-line name) when a value is invalid.
void validate(const SolverOptions& options);
// Throws naming the option when the solver or a value is invalid.
std::unique_ptr<Optimizer> make_optimizer(const SolverOptions& options);

// Scales grads so no norm exceeds threshold; method as in SolverOptions.
// Returns the largest norm before clipping.
double clip_gradients(const std::vector<Param*>& params, double threshold, const std::string& method);

}  // namespace dlscale
