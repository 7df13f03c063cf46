// CPU dense layer: both passes are single OpenBLAS GEMMs over the batch.
#include "layers/dense.h"

#include <cmath>

#include "runtime/core/blas.h"

namespace dlscale {

namespace {

class Dense : public Layer {
 public:
  Dense(const Shape& input_shape, std::int64_t units, bool bias, bool per_position, DType dtype, Rng& rng)
      : input_shape_(input_shape),
        features_(per_position ? input_shape.back() : numel(input_shape)),
        positions_(numel(input_shape) / features_),
        units_(units),
        has_bias_(bias),
        per_position_(per_position) {
    output_shape_ = {units};
    if (per_position) output_shape_.assign(input_shape.begin(), input_shape.end() - 1), output_shape_.push_back(units);
    weight_ = {"weight", Tensor({units, features_}, dtype), Tensor({units, features_}, dtype), true};
    // He-normal: keeps the activation variance steady through ReLU layers.
    const double stddev = std::sqrt(2.0 / static_cast<double>(features_));
    for (std::int64_t i = 0; i < weight_.value.numel(); ++i) weight_.value.set(i, rng.normal(0.0, stddev));
    if (has_bias_) bias_ = {"bias", Tensor({units}, dtype), Tensor({units}, dtype), false};
  }

  std::string kind() const override { return "dense"; }
  std::map<std::string, double> settings() const override { return {{"per_position", per_position_ ? 1.0 : 0.0}}; }

  std::vector<Param*> params() override {
    if (has_bias_) return {&weight_, &bias_};
    return {&weight_};
  }

  // x is (N, input_shape...) viewed as (N, F), or as (N·P, F) per position;
  // y is (N, units) or (N, P..., units).
  Tensor forward(const Tensor& x, bool) override {
    check_input(x);
    x_ = x;
    const std::int64_t n = x.dim(0) * positions_;
    Tensor y = Tensor::uninitialized(batch_shape(x.dim(0)), x.dtype());  // the GEMM or the bias fills it
    dispatch(x.dtype(), [&]<class T>() {
      T* py = y.data<T>();
      T beta = 0;
      if (has_bias_) {
        // Start every row at b so the GEMM adds x·Wᵀ onto it (beta = 1).
        const T* pb = bias_.value.data<T>();
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t u = 0; u < units_; ++u) py[i * units_ + u] = pb[u];
        beta = 1;
      }
      gemm<T>(false, true, n, units_, features_, T(1), x.data<T>(), weight_.value.data<T>(), beta, py);
    });
    return y;
  }

  // dy is shaped like the output; returns dx shaped like the forward input.
  Tensor backward(const Tensor& dy) override {
    DLSCALE_REQUIRE(x_.rank() >= 2, "dense: backward called without a forward");
    const std::int64_t n = x_.dim(0) * positions_;
    DLSCALE_REQUIRE(dy.shape() == batch_shape(x_.dim(0)) && dy.dtype() == x_.dtype(),
                    "dense: backward got dL/dy of shape " + to_string(dy.shape()) + " (" + to_string(dy.dtype()) +
                        ") but the forward output was " + to_string(batch_shape(x_.dim(0))) + " (" +
                        to_string(x_.dtype()) + ")");
    Tensor dx = input_grad_needed_ ? Tensor::uninitialized(x_.shape(), x_.dtype()) : Tensor();  // beta = 0 GEMM
    dispatch(dy.dtype(), [&]<class T>() {
      const T* pdy = dy.data<T>();
      // dW (units, F) = dyᵀ (units, N) · x (N, F)
      gemm<T>(true, false, units_, features_, n, T(1), pdy, x_.data<T>(), T(0), weight_.grad.data<T>());
      // dx (N, F) = dy (N, units) · W (units, F)
      if (input_grad_needed_)
        gemm<T>(false, false, n, features_, units_, T(1), pdy, weight_.value.data<T>(), T(0), dx.data<T>());
      if (has_bias_) {
        // db (units) = column sums of dy
        T* db = bias_.grad.data<T>();
        for (std::int64_t u = 0; u < units_; ++u) db[u] = 0;
        for (std::int64_t i = 0; i < n; ++i)
          for (std::int64_t u = 0; u < units_; ++u) db[u] += pdy[i * units_ + u];
      }
    });
    x_ = Tensor();  // the activation is not needed past this step
    return dx;
  }

 private:
  Shape batch_shape(std::int64_t n) const {
    Shape s{n};
    s.insert(s.end(), output_shape_.begin(), output_shape_.end());
    return s;
  }

  void check_input(const Tensor& x) const {
    Shape sample(x.shape().begin() + (x.rank() ? 1 : 0), x.shape().end());
    if (x.rank() < 2 || sample != input_shape_)
      fail("dense: expected input N×" + to_string(input_shape_) + ", got " + to_string(x.shape()));
    if (x.dtype() != weight_.value.dtype())
      fail("dense: input is " + to_string(x.dtype()) + " but the parameters are " +
           to_string(weight_.value.dtype()));
  }

  Shape input_shape_;
  std::int64_t features_, positions_, units_;
  bool has_bias_, per_position_;
  Param weight_, bias_;
  Tensor x_;  // forward input, kept for dW
};

}  // namespace

std::unique_ptr<Layer> make_dense(const LayerSpec& spec, const LayerContext& ctx) {
  const std::int64_t units = spec.get_int("units");
  const bool bias = spec.get_bool("bias", true);
  const bool per_position = spec.get_bool("per_position", false);
  if (units < 1) spec.fail_here("units=" + std::to_string(units) + " must be at least 1");
  if (ctx.input_shape.empty() || numel(ctx.input_shape) < 1)
    spec.fail_here("needs a non-empty input, got " + to_string(ctx.input_shape));
  if (per_position && ctx.input_shape.size() < 2)
    spec.fail_here("per_position=true needs positions × features (T×C), got " + to_string(ctx.input_shape));
  const std::int64_t features = per_position ? ctx.input_shape.back() : numel(ctx.input_shape);
  check_layer_size(spec, ctx, "weight", {units, features});
  if (per_position) check_layer_size(spec, ctx, "output", {numel(ctx.input_shape) / features, units});
  DLSCALE_REQUIRE(ctx.rng != nullptr, "dense: no random stream to initialize the weights");
  return std::make_unique<Dense>(ctx.input_shape, units, bias, per_position, ctx.dtype, *ctx.rng);
}

}  // namespace dlscale
