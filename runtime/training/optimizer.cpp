// Solvers sgdm, adam and rmsprop, plus the steps every solver shares:
// L2 regularization, gradient clipping and option checks. Update rules are
// MATLAB's (trainingOptions), so results match runs users already have.
#include "runtime/training/optimizer.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

namespace dlscale {

namespace {

// Below this many elements an OpenMP team costs more than the loop.
constexpr std::int64_t kParallelMin = 1 << 15;
// Norms are summed in fixed chunks and the partials added in order, so the
// result does not depend on the thread count (ranks must agree bitwise).
constexpr std::int64_t kNormChunk = 1 << 14;

std::string number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

template <class T>
double sum_squares(const T* g, std::int64_t n) {
  const std::int64_t chunks = (n + kNormChunk - 1) / kNormChunk;
  std::vector<double> partial(static_cast<std::size_t>(chunks), 0.0);
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (std::int64_t c = 0; c < chunks; ++c) {
    double s = 0.0;
    const std::int64_t end = std::min(n, (c + 1) * kNormChunk);
    for (std::int64_t i = c * kNormChunk; i < end; ++i) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    partial[static_cast<std::size_t>(c)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return total;
}

double squared_norm(const Tensor& t) {
  return dispatch(t.dtype(), [&]<class T>() { return sum_squares(t.data<T>(), t.numel()); });
}

void scale(Tensor& t, double factor) {
  dispatch(t.dtype(), [&]<class T>() {
    T* g = t.data<T>();
    const T f = static_cast<T>(factor);
    const std::int64_t n = t.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (std::int64_t i = 0; i < n; ++i) g[i] *= f;
  });
}

// grad += l2 * value
void add_weight_decay(Param& p, double l2) {
  dispatch(p.value.dtype(), [&]<class T>() {
    T* g = p.grad.data<T>();
    const T* w = p.value.data<T>();
    const T k = static_cast<T>(l2);
    const std::int64_t n = p.value.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
    for (std::int64_t i = 0; i < n; ++i) g[i] += k * w[i];
  });
}

std::string param_label(const Param& p, std::size_t index) {
  return "parameter " + std::to_string(index) + " ('" + p.name + "')";
}

// Zeroed tensors shaped like each param, for per-parameter solver state.
std::vector<Tensor> zeros_like(const std::vector<Param*>& params) {
  std::vector<Tensor> out;
  out.reserve(params.size());
  for (const Param* p : params) out.emplace_back(p->value.shape(), p->value.dtype());
  return out;
}

void add_state(std::vector<std::pair<std::string, Tensor*>>& out, std::vector<Tensor>& tensors,
               std::size_t i, const char* what) {
  out.emplace_back("param" + std::to_string(i) + "." + what, &tensors[i]);
}

// v = momentum*v - lr*g; w += v
class Sgdm final : public Optimizer {
 public:
  explicit Sgdm(SolverOptions o) : Optimizer(std::move(o)) {}

  std::vector<std::pair<std::string, Tensor*>> state() override {
    std::vector<std::pair<std::string, Tensor*>> out;
    for (std::size_t i = 0; i < velocity_.size(); ++i) add_state(out, velocity_, i, "velocity");
    return out;
  }

 protected:
  void create_state(const std::vector<Param*>& params) override { velocity_ = zeros_like(params); }

  void update(const std::vector<Param*>& params, double learn_rate) override {
    for (std::size_t k = 0; k < params.size(); ++k) {
      Param& p = *params[k];
      dispatch(p.value.dtype(), [&]<class T>() {
        T* w = p.value.data<T>();
        const T* g = p.grad.data<T>();
        T* v = velocity_[k].data<T>();
        const T mu = static_cast<T>(options_.momentum), lr = static_cast<T>(learn_rate);
        const std::int64_t n = p.value.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
        for (std::int64_t i = 0; i < n; ++i) {
          v[i] = mu * v[i] - lr * g[i];
          w[i] += v[i];
        }
      });
    }
  }

 private:
  std::vector<Tensor> velocity_;
};

// m = b1*m + (1-b1)g; v = b2*v + (1-b2)g^2; w -= lr * mhat / (sqrt(vhat) + eps)
// with mhat = m/(1-b1^t), vhat = v/(1-b2^t) and t the 1-based step number.
class Adam final : public Optimizer {
 public:
  explicit Adam(SolverOptions o) : Optimizer(std::move(o)) {}

  std::vector<std::pair<std::string, Tensor*>> state() override {
    std::vector<std::pair<std::string, Tensor*>> out;
    if (step_.empty()) return out;
    out.emplace_back("step", &step_);
    for (std::size_t i = 0; i < mean_.size(); ++i) {
      add_state(out, mean_, i, "average_grad");
      add_state(out, sq_mean_, i, "average_sq_grad");
    }
    return out;
  }

 protected:
  void create_state(const std::vector<Param*>& params) override {
    // float64 holds every step count a run can reach exactly.
    step_ = Tensor({1}, DType::f64);
    mean_ = zeros_like(params);
    sq_mean_ = zeros_like(params);
  }

  void update(const std::vector<Param*>& params, double learn_rate) override {
    const double t = step_.data<double>()[0] + 1.0;
    step_.data<double>()[0] = t;
    const double b1 = options_.gradient_decay, b2 = options_.squared_gradient_decay;
    // Bias corrections folded into two scalars, computed in double.
    const double step_size = learn_rate / (1.0 - std::pow(b1, t));
    const double inv_bias2 = 1.0 / (1.0 - std::pow(b2, t));
    for (std::size_t k = 0; k < params.size(); ++k) {
      Param& p = *params[k];
      dispatch(p.value.dtype(), [&]<class T>() {
        T* w = p.value.data<T>();
        const T* g = p.grad.data<T>();
        T* m = mean_[k].data<T>();
        T* v = sq_mean_[k].data<T>();
        // 1 - b is formed in double: 1 - 0.999f loses 1e-5 of relative precision.
        const T tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2), eps = static_cast<T>(options_.epsilon);
        const T cb1 = static_cast<T>(1.0 - b1), cb2 = static_cast<T>(1.0 - b2);
        const T a = static_cast<T>(step_size), c = static_cast<T>(inv_bias2);
        const std::int64_t n = p.value.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
        for (std::int64_t i = 0; i < n; ++i) {
          m[i] = tb1 * m[i] + cb1 * g[i];
          v[i] = tb2 * v[i] + cb2 * g[i] * g[i];
          w[i] -= a * m[i] / (std::sqrt(v[i] * c) + eps);
        }
      });
    }
  }

 private:
  Tensor step_;
  std::vector<Tensor> mean_, sq_mean_;
};

// v = b2*v + (1-b2)g^2; w -= lr * g / (sqrt(v) + eps), with b2 the
// squared-gradient decay as given (the trainer supplies rmsprop's 0.9 default).
class RmsProp final : public Optimizer {
 public:
  explicit RmsProp(SolverOptions o) : Optimizer(std::move(o)) {}

  std::vector<std::pair<std::string, Tensor*>> state() override {
    std::vector<std::pair<std::string, Tensor*>> out;
    for (std::size_t i = 0; i < sq_mean_.size(); ++i) add_state(out, sq_mean_, i, "average_sq_grad");
    return out;
  }

 protected:
  void create_state(const std::vector<Param*>& params) override { sq_mean_ = zeros_like(params); }

  void update(const std::vector<Param*>& params, double learn_rate) override {
    for (std::size_t k = 0; k < params.size(); ++k) {
      Param& p = *params[k];
      dispatch(p.value.dtype(), [&]<class T>() {
        T* w = p.value.data<T>();
        const T* g = p.grad.data<T>();
        T* v = sq_mean_[k].data<T>();
        const double decay = options_.squared_gradient_decay;
        const T b2 = static_cast<T>(decay), cb2 = static_cast<T>(1.0 - decay);  // 1 - b2 in double, as in adam
        const T eps = static_cast<T>(options_.epsilon), lr = static_cast<T>(learn_rate);
        const std::int64_t n = p.value.numel();
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
        for (std::int64_t i = 0; i < n; ++i) {
          v[i] = b2 * v[i] + cb2 * g[i] * g[i];
          w[i] -= lr * g[i] / (std::sqrt(v[i]) + eps);
        }
      });
    }
  }

 private:
  std::vector<Tensor> sq_mean_;
};

void check_threshold_method(const std::string& method) {
  if (method != "l2norm" && method != "global-l2norm")
    fail("unknown gradient-threshold-method '" + method + "' (expected l2norm or global-l2norm)");
}

// Written so that NaN fails every range check.
void check_decay(double value, const char* name) {
  if (!(value >= 0.0 && value < 1.0)) fail(std::string(name) + " must be in [0, 1), got " + number(value));
}

}  // namespace

void Optimizer::prepare(const std::vector<Param*>& params) {
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Param& p = *params[i];
    DLSCALE_REQUIRE(p.grad.shape() == p.value.shape() && p.grad.dtype() == p.value.dtype(),
                    param_label(p, i) + " has a gradient of " + to_string(p.grad.dtype()) + " " +
                        to_string(p.grad.shape()) + " but a value of " + to_string(p.value.dtype()) + " " +
                        to_string(p.value.shape()));
  }
  if (!prepared_) {
    layout_.clear();
    for (const Param* p : params) layout_.emplace_back(p->value.shape(), p->value.dtype());
    create_state(params);
    prepared_ = true;
    return;
  }
  // State is matched to params by position; a different list would silently
  // apply one tensor's momentum to another.
  DLSCALE_REQUIRE(params.size() == layout_.size(),
                  "optimizer state was made for " + std::to_string(layout_.size()) + " parameters but got " +
                      std::to_string(params.size()));
  for (std::size_t i = 0; i < params.size(); ++i) {
    const Param& p = *params[i];
    DLSCALE_REQUIRE(p.value.shape() == layout_[i].first && p.value.dtype() == layout_[i].second,
                    "optimizer state of " + param_label(p, i) + " is " + to_string(layout_[i].second) + " " +
                        to_string(layout_[i].first) + " but the parameter is " + to_string(p.value.dtype()) +
                        " " + to_string(p.value.shape()));
  }
}

void Optimizer::step(const std::vector<Param*>& params, double learn_rate) {
  DLSCALE_REQUIRE(std::isfinite(learn_rate) && learn_rate >= 0.0,
                  "learning rate must be a finite number >= 0, got " + number(learn_rate));
  prepare(params);
  if (options_.l2_regularization > 0.0) {
    for (Param* p : params)
      if (p->regularize) add_weight_decay(*p, options_.l2_regularization);
  }
  if (std::isfinite(options_.gradient_threshold))
    clip_gradients(params, options_.gradient_threshold, options_.gradient_threshold_method);
  update(params, learn_rate);
}

double clip_gradients(const std::vector<Param*>& params, double threshold, const std::string& method) {
  check_threshold_method(method);
  if (!(threshold > 0.0)) fail("gradient-threshold must be > 0, got " + number(threshold));
  if (method == "l2norm") {
    double largest = 0.0;
    for (Param* p : params) {
      const double norm = std::sqrt(squared_norm(p->grad));
      largest = std::max(largest, norm);
      if (norm > threshold) scale(p->grad, threshold / norm);
    }
    return largest;
  }
  double total = 0.0;
  for (const Param* p : params) total += squared_norm(p->grad);
  const double norm = std::sqrt(total);
  if (norm > threshold)
    for (Param* p : params) scale(p->grad, threshold / norm);
  return norm;
}

void validate(const SolverOptions& o) {
  if (o.solver != "sgdm" && o.solver != "adam" && o.solver != "rmsprop")
    fail("unknown solver '" + o.solver + "' (expected sgdm, adam or rmsprop)");
  // MATLAB accepts momentum 0..1 inclusive; above 1 the velocity grows without bound.
  if (!(o.momentum >= 0.0 && o.momentum <= 1.0)) fail("momentum must be in [0, 1], got " + number(o.momentum));
  check_decay(o.gradient_decay, "gradient-decay-factor");
  check_decay(o.squared_gradient_decay, "squared-gradient-decay-factor");
  if (!(o.epsilon > 0.0 && std::isfinite(o.epsilon))) fail("epsilon must be > 0, got " + number(o.epsilon));
  if (!(o.l2_regularization >= 0.0 && std::isfinite(o.l2_regularization)))
    fail("l2-regularization must be a finite number >= 0, got " + number(o.l2_regularization));
  if (!(o.gradient_threshold > 0.0))
    fail("gradient-threshold must be > 0 (inf turns clipping off), got " + number(o.gradient_threshold));
  check_threshold_method(o.gradient_threshold_method);
}

std::unique_ptr<Optimizer> make_optimizer(const SolverOptions& options) {
  validate(options);
  if (options.solver == "adam") return std::make_unique<Adam>(options);
  if (options.solver == "rmsprop") return std::make_unique<RmsProp>(options);
  return std::make_unique<Sgdm>(options);
}

}  // namespace dlscale
