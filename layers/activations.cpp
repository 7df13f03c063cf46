// Elementwise activations. One layer template owns the loops (and their
// OpenMP pragmas); each function is a small functor giving f(x) and f'(x)
// expressed through x and y = f(x), whichever is cheaper and more accurate,
// and grad(x, y, dy) = dy · f'(x), which ReLU overrides with a select: a
// branch on the sign of the input mispredicted half the time and made ReLU's
// backward the slowest layer of the CNN (15 cycles per element, measured).
#include "layers/activations.h"

#include <cmath>
#include <string>
#include <type_traits>
#include <utility>

#include "layers/fast_math.h"

namespace dlscale {

namespace {
// Below this many elements a parallel region costs more than the loop.
constexpr std::int64_t kParallelMin = 1 << 15;

// dy · f'(x) for the functors that give only f'.
struct ChainRule {
  template <class T, class Op>
  static T grad(const Op& op, T x, T y, T dy) { return dy * op.df(x, y); }
};

struct Relu {
  template <class T>
  T f(T x) const { return x > T(0) ? x : T(0); }
  // The kink at 0 gets derivative 0, as PyTorch does.
  template <class T>
  T df(T x, T) const { return x > T(0) ? T(1) : T(0); }
  // A select, so the loop vectorizes; like PyTorch's threshold_backward it
  // gives 0 (not NaN) where x <= 0 and dy is infinite.
  template <class T>
  T grad(T x, T, T dy) const { return x > T(0) ? dy : T(0); }
};

struct LeakyRelu {
  double alpha;
  template <class T>
  T f(T x) const { return x > T(0) ? x : static_cast<T>(alpha) * x; }
  template <class T>
  T df(T x, T) const { return x > T(0) ? T(1) : static_cast<T>(alpha); }
};

// gelu(x) = x Φ(x), Φ the standard normal CDF; gelu'(x) = Φ(x) + x φ(x).
// float32 takes erf and exp from layers/fast_math.h so the loops vectorize;
// float64 (the gradient checks) keeps libm's.
struct Gelu {
  template <class T>
  static T erf(T x) {
    if constexpr (std::is_same_v<T, float>) return erf_float(x);
    else return std::erf(x);
  }
  template <class T>
  static T exp(T x) {
    if constexpr (std::is_same_v<T, float>) return exp_float(x);
    else return std::exp(x);
  }
  template <class T>
  T f(T x) const { return T(0.5) * x * (T(1) + erf(x * static_cast<T>(M_SQRT1_2))); }
  template <class T>
  T df(T x, T) const {
    T cdf = T(0.5) * (T(1) + erf(x * static_cast<T>(M_SQRT1_2)));
    T pdf = exp(T(-0.5) * x * x) * static_cast<T>(0.5 * M_2_SQRTPI * M_SQRT1_2);
    return cdf + x * pdf;
  }
};

struct Tanh {
  template <class T>
  T f(T x) const { return std::tanh(x); }
  template <class T>
  T df(T, T y) const { return T(1) - y * y; }
};

struct Sigmoid {
  // Branching keeps exp() from overflowing for large |x|.
  template <class T>
  T f(T x) const {
    if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
    T e = std::exp(x);
    return e / (T(1) + e);
  }
  template <class T>
  T df(T, T y) const { return y * (T(1) - y); }
};

template <class Op, class T>
T gradient(const Op& op, T x, T y, T dy) {
  if constexpr (requires { op.grad(x, y, dy); })
    return op.grad(x, y, dy);
  else
    return ChainRule::grad(op, x, y, dy);
}

template <class Op>
class Elementwise final : public Layer {
 public:
  Elementwise(Op op, const LayerSpec& spec, const LayerContext& ctx)
      : op_(op), kind_(spec.kind()), who_(spec.where() + ": " + spec.kind()), dtype_(ctx.dtype) {
    output_shape_ = ctx.input_shape;
  }

  std::string kind() const override { return kind_; }
  std::map<std::string, double> settings() const override {
    if constexpr (requires { op_.alpha; }) return {{"alpha", op_.alpha}};
    return {};
  }

  // Elementwise, so any layout: y, dx in x's.
  bool takes_blocked_input() const override { return true; }

  // x, y are (N, ...output_shape).
  Tensor forward(const Tensor& x, bool) override {
    check_input(x);
    Tensor y = Tensor::uninitialized(x.shape(), x.dtype(), x.layout());
    dispatch(dtype_, [&]<class T>() {
      const T* __restrict xp = x.data_any_layout<T>();
      T* __restrict yp = y.data_any_layout<T>();
      const std::int64_t n = x.numel();
#pragma omp parallel for simd if (n >= kParallelMin)
      for (std::int64_t i = 0; i < n; ++i) yp[i] = op_.f(xp[i]);
    });
    x_ = x;
    y_ = y;
    return y;
  }

  Tensor backward(const Tensor& dy) override {
    if (x_.rank() == 0) fail(who_ + ": backward called before forward");
    if (dy.shape() != y_.shape() || dy.dtype() != dtype_)
      fail(who_ + ": gradient is " + to_string(dy.shape()) + " " + to_string(dy.dtype()) + " but the output was " +
           to_string(y_.shape()) + " " + to_string(dtype_));
    const Tensor g = dy.in_layout(y_.layout());
    Tensor dx = Tensor::uninitialized(g.shape(), dtype_, g.layout());
    dispatch(dtype_, [&]<class T>() {
      const T* __restrict xp = x_.data_any_layout<T>();
      const T* __restrict yp = y_.data_any_layout<T>();
      const T* __restrict dyp = g.data_any_layout<T>();
      T* __restrict dxp = dx.data_any_layout<T>();
      const std::int64_t n = dy.numel();
#pragma omp parallel for simd if (n >= kParallelMin)
      for (std::int64_t i = 0; i < n; ++i) dxp[i] = gradient(op_, xp[i], yp[i], dyp[i]);
    });
    return dx;
  }

 private:
  void check_input(const Tensor& x) const {
    Shape sample(x.shape().begin() + (x.rank() > 0 ? 1 : 0), x.shape().end());
    if (x.rank() == 0 || sample != output_shape_ || x.dtype() != dtype_)
      fail(who_ + ": input is " + to_string(x.shape()) + " " + to_string(x.dtype()) + " but the layer expects N x " +
           to_string(output_shape_) + " " + to_string(dtype_));
  }

  Op op_;
  std::string kind_, who_;
  DType dtype_;
  Tensor x_, y_;  // of the last forward, for backward
};

template <class Op>
std::unique_ptr<Layer> make(Op op, const LayerSpec& spec, const LayerContext& ctx) {
  return std::make_unique<Elementwise<Op>>(op, spec, ctx);
}
}  // namespace

std::unique_ptr<Layer> make_relu(const LayerSpec& spec, const LayerContext& ctx) { return make(Relu{}, spec, ctx); }

std::unique_ptr<Layer> make_leakyrelu(const LayerSpec& spec, const LayerContext& ctx) {
  double alpha = spec.get_double("alpha", 0.01);
  if (!std::isfinite(alpha) || alpha < 0)
    spec.fail_here("alpha must be a finite number >= 0, got " + spec.get_string("alpha", ""));
  return make(LeakyRelu{alpha}, spec, ctx);
}

std::unique_ptr<Layer> make_gelu(const LayerSpec& spec, const LayerContext& ctx) { return make(Gelu{}, spec, ctx); }
std::unique_ptr<Layer> make_tanh(const LayerSpec& spec, const LayerContext& ctx) { return make(Tanh{}, spec, ctx); }
std::unique_ptr<Layer> make_sigmoid(const LayerSpec& spec, const LayerContext& ctx) {
  return make(Sigmoid{}, spec, ctx);
}

}  // namespace dlscale
