// CPU layer normalization. Row statistics are taken in double; rows run in
// parallel, the scale and offset gradients are summed serially in row order
// so they do not depend on the thread count.
#include "layers/layernorm.h"

#include <cmath>

namespace dlscale {

namespace {

class LayerNorm final : public Layer {
 public:
  LayerNorm(const LayerSpec& spec, const Shape& shape, double epsilon, DType dtype)
      : who_(spec.where() + ": layernorm"), width_(shape.back()), epsilon_(epsilon) {
    output_shape_ = shape;
    scale_ = {"scale", Tensor({width_}, dtype), Tensor({width_}, dtype), false};
    offset_ = {"offset", Tensor({width_}, dtype), Tensor({width_}, dtype), false};
    for (std::int64_t c = 0; c < width_; ++c) scale_.value.set(c, 1.0);
  }

  std::string kind() const override { return "layernorm"; }
  std::vector<Param*> params() override { return {&scale_, &offset_}; }
  std::map<std::string, double> settings() const override { return {{"epsilon", epsilon_}}; }

  Tensor forward(const Tensor& x, bool) override {
    check(x, "input");
    const std::int64_t rows = x.numel() / width_, c = width_;
    Tensor y = Tensor::uninitialized(x.shape(), x.dtype());
    xhat_ = Tensor::uninitialized(x.shape(), x.dtype());
    rstd_.assign(rows, 0.0);
    dispatch(x.dtype(), [&]<class T>() {
      const T* px = x.data<T>();
      const T* g = scale_.value.data<T>();
      const T* b = offset_.value.data<T>();
      T* py = y.data<T>();
      T* xh = xhat_.data<T>();
#pragma omp parallel for if (rows * c > 65536)
      for (std::int64_t r = 0; r < rows; ++r) {
        const T* xr = px + r * c;
        double mean = 0, var = 0;
        for (std::int64_t j = 0; j < c; ++j) mean += xr[j];
        mean /= static_cast<double>(c);
        for (std::int64_t j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
        const double rstd = 1.0 / std::sqrt(var / static_cast<double>(c) + epsilon_);
        rstd_[r] = rstd;
        for (std::int64_t j = 0; j < c; ++j) {
          xh[r * c + j] = static_cast<T>((xr[j] - mean) * rstd);
          py[r * c + j] = xh[r * c + j] * g[j] + b[j];
        }
      }
    });
    return y;
  }

  // dx = rstd · (dx̂ - mean(dx̂) - x̂ · mean(dx̂ ⊙ x̂)) per row, dx̂ = dy ⊙ scale.
  Tensor backward(const Tensor& dy) override {
    if (xhat_.empty() || dy.shape() != xhat_.shape() || dy.dtype() != xhat_.dtype())
      fail(who_ + ": backward got dL/dy " + to_string(dy.shape()) + " but the last forward gave " +
           to_string(xhat_.shape()));
    const std::int64_t rows = dy.numel() / width_, c = width_;
    Tensor dx = Tensor::uninitialized(dy.shape(), dy.dtype());
    dispatch(dy.dtype(), [&]<class T>() {
      const T* g = dy.data<T>();
      const T* xh = xhat_.data<T>();
      const T* s = scale_.value.data<T>();
      T* d = dx.data<T>();
#pragma omp parallel for if (rows * c > 65536)
      for (std::int64_t r = 0; r < rows; ++r) {
        double mean_d = 0, mean_dx = 0;
        for (std::int64_t j = 0; j < c; ++j) {
          const double dxh = static_cast<double>(g[r * c + j]) * s[j];
          mean_d += dxh;
          mean_dx += dxh * xh[r * c + j];
        }
        mean_d /= static_cast<double>(c);
        mean_dx /= static_cast<double>(c);
        for (std::int64_t j = 0; j < c; ++j)
          d[r * c + j] = static_cast<T>(rstd_[r] * (static_cast<double>(g[r * c + j]) * s[j] - mean_d -
                                                    xh[r * c + j] * mean_dx));
      }
      T* ds = scale_.grad.data<T>();
      T* db = offset_.grad.data<T>();
      for (std::int64_t j = 0; j < c; ++j) ds[j] = 0, db[j] = 0;
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t j = 0; j < c; ++j) ds[j] += g[r * c + j] * xh[r * c + j], db[j] += g[r * c + j];
    });
    xhat_ = Tensor();
    return dx;
  }

 private:
  void check(const Tensor& t, const char* what) const {
    Shape sample(t.shape().begin() + (t.rank() ? 1 : 0), t.shape().end());
    if (t.rank() == 0 || sample != output_shape_ || t.dtype() != scale_.value.dtype())
      fail(who_ + ": " + what + " is " + to_string(t.shape()) + " " + to_string(t.dtype()) +
           " but the layer expects N x " + to_string(output_shape_) + " " + to_string(scale_.value.dtype()));
  }

  std::string who_;
  std::int64_t width_;
  double epsilon_;
  Param scale_, offset_;
  Tensor xhat_;               // normalized input of the last forward
  std::vector<double> rstd_;  // 1/sqrt(var + epsilon) per row
};

}  // namespace

std::unique_ptr<Layer> make_layernorm(const LayerSpec& spec, const LayerContext& ctx) {
  const double epsilon = spec.get_double("epsilon", 1e-5);
  if (!(epsilon > 0)) spec.fail_here("epsilon must be positive");
  if (ctx.input_shape.empty() || numel(ctx.input_shape) < 1)
    spec.fail_here("needs a non-empty input, got " + to_string(ctx.input_shape));
  return std::make_unique<LayerNorm>(spec, ctx.input_shape, epsilon, ctx.dtype);
}

}  // namespace dlscale
