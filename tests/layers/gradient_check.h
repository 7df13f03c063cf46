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
#include "runtime/rng.h"

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
  Tensor num_dx(x.shape(), DType::f64);
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    double v = xv.at(i);
    xv.set(i, v + h);
    double lp = loss();
    xv.set(i, v - h);
    double lm = loss();
    xv.set(i, v);
    num_dx.set(i, (lp - lm) / (2 * h));
  }
  expect_close(dx, num_dx, tol, layer.kind() + " dL/dx");

  for (Param* p : layer.params()) {
    Tensor analytic = p->grad.clone();
    Tensor numeric(p->value.shape(), DType::f64);
    for (std::int64_t i = 0; i < p->value.numel(); ++i) {
      double v = p->value.at(i);
      p->value.set(i, v + h);
      double lp = loss();
      p->value.set(i, v - h);
      double lm = loss();
      p->value.set(i, v);
      numeric.set(i, (lp - lm) / (2 * h));
    }
    expect_close(analytic, numeric, tol, layer.kind() + " dL/d" + p->name);
  }
}

}  // namespace dlscale::testing
