// Finite-difference gradient check shared by every layer test.
// The scalar loss is L = sum(y ⊙ r) for a fixed random r, so dL/dy = r; the
// analytic dL/dx and dL/dparam from backward(r) are compared with central
// differences (L(v+h) - L(v-h)) / 2h on every element, in float64.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "layers/layer.h"
#include "runtime/core/rng.h"

namespace dlscale::testing {

inline Tensor random_tensor(const Shape& shape, Rng& rng, DType dtype = DType::f64, double scale = 1.0) {
  Tensor t(shape, dtype);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set(i, rng.normal(0.0, scale));
  return t;
}

inline double weighted_sum(const Tensor& y, const Tensor& r) {
  double s = 0;
  for (std::int64_t i = 0; i < y.numel(); ++i) s += y.at(i) * r.at(i);
  return s;
}

// |a - b| <= tol * max(1, |a|, |b|) for every element, reporting the worst one.
inline void expect_close(const Tensor& analytic, const Tensor& numeric, double tol, const std::string& what) {
  ASSERT_EQ(analytic.shape(), numeric.shape()) << what;
  double worst = 0;
  std::int64_t worst_i = -1;
  for (std::int64_t i = 0; i < analytic.numel(); ++i) {
    double a = analytic.at(i), b = numeric.at(i);
    double err = std::abs(a - b) / std::max({1.0, std::abs(a), std::abs(b)});
    if (err > worst) worst = err, worst_i = i;
  }
  EXPECT_LE(worst, tol) << what << ": worst relative error at element " << worst_i << " (analytic "
                        << (worst_i >= 0 ? analytic.at(worst_i) : 0) << ", numeric "
                        << (worst_i >= 0 ? numeric.at(worst_i) : 0) << ")";
}

// Central differences of loss() with respect to every element of `t`
// (perturbed in place and restored).
template <class Loss>
Tensor numeric_gradient(Tensor& t, Loss&& loss, double h) {
  Tensor numeric(t.shape(), DType::f64);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    double v = t.at(i);
    t.set(i, v + h);
    double lp = loss();
    t.set(i, v - h);
    double lm = loss();
    t.set(i, v);
    numeric.set(i, (lp - lm) / (2 * h));
  }
  return numeric;
}

// Every param's analytic grad (from the last backward) against numeric_gradient.
template <class Loss>
void check_param_gradients(const std::vector<Param*>& params, Loss&& loss, double h, double tol,
                           const std::string& who) {
  for (Param* p : params) {
    Tensor analytic = p->grad.clone();
    expect_close(analytic, numeric_gradient(p->value, loss, h), tol, who + " dL/d" + p->name);
  }
}

// Checks dL/dx and every parameter gradient of `layer` at input x (float64).
// training selects the forward mode; layers with randomness (dropout) must
// reuse their mask for repeated forwards in the same mode for this to work.
inline void check_gradients(Layer& layer, const Tensor& x, bool training = true, double h = 1e-6,
                            double tol = 1e-6, std::uint64_t seed = 7) {
  Rng rng(seed);
  Tensor y = layer.forward(x, training);
  Tensor r = random_tensor(y.shape(), rng);
  Tensor dx = layer.backward(r);

  auto loss = [&]() { return weighted_sum(layer.forward(x, training), r); };
  Tensor xv = x;  // shares storage: perturbing xv perturbs the forward input
  expect_close(dx, numeric_gradient(xv, loss, h), tol, layer.kind() + " dL/dx");
  check_param_gradients(layer.params(), loss, h, tol, layer.kind());
}

}  // namespace dlscale::testing
