// CPU positional embedding: a broadcast add; dP sums dy over the batch.
#include "layers/positional_embedding.h"

namespace dlscale {

namespace {

class PositionalEmbedding final : public Layer {
 public:
  PositionalEmbedding(const LayerSpec& spec, const Shape& shape, DType dtype, Rng& rng)
      : who_(spec.where() + ": posembedding") {
    output_shape_ = shape;
    weight_ = {"weight", Tensor(shape, dtype), Tensor(shape, dtype), true};
    for (std::int64_t i = 0; i < weight_.value.numel(); ++i) weight_.value.set(i, rng.normal(0.0, 0.02));
  }

  std::string kind() const override { return "posembedding"; }
  std::vector<Param*> params() override { return {&weight_}; }

  Tensor forward(const Tensor& x, bool) override {
    check(x, "input");
    Tensor y = Tensor::uninitialized(x.shape(), x.dtype());
    const std::int64_t plane = weight_.value.numel(), n = x.dim(0);
    dispatch(x.dtype(), [&]<class T>() {
      const T* px = x.data<T>();
      const T* p = weight_.value.data<T>();
      T* py = y.data<T>();
#pragma omp parallel for if (n * plane > 65536)
      for (std::int64_t s = 0; s < n; ++s)
        for (std::int64_t i = 0; i < plane; ++i) py[s * plane + i] = px[s * plane + i] + p[i];
    });
    batch_ = n;
    return y;
  }

  Tensor backward(const Tensor& dy) override {
    check(dy, "gradient");
    if (dy.dim(0) != batch_) fail(who_ + ": backward got a batch of " + std::to_string(dy.dim(0)) + ", forward had " +
                                  std::to_string(batch_));
    const std::int64_t plane = weight_.value.numel();
    dispatch(dy.dtype(), [&]<class T>() {
      const T* g = dy.data<T>();
      T* dp = weight_.grad.data<T>();
      for (std::int64_t i = 0; i < plane; ++i) dp[i] = 0;
      for (std::int64_t s = 0; s < batch_; ++s)
        for (std::int64_t i = 0; i < plane; ++i) dp[i] += g[s * plane + i];
    });
    return dy;  // y = x + P: dL/dx is dL/dy (layers never write their dy)
  }

 private:
  void check(const Tensor& t, const char* what) const {
    Shape sample(t.shape().begin() + (t.rank() ? 1 : 0), t.shape().end());
    if (t.rank() == 0 || sample != output_shape_ || t.dtype() != weight_.value.dtype())
      fail(who_ + ": " + what + " is " + to_string(t.shape()) + " " + to_string(t.dtype()) +
           " but the layer expects N x " + to_string(output_shape_) + " " + to_string(weight_.value.dtype()));
  }

  std::string who_;
  Param weight_;
  std::int64_t batch_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_posembedding(const LayerSpec& spec, const LayerContext& ctx) {
  if (ctx.input_shape.size() != 2)
    spec.fail_here("needs a sequence input T×C (after an embedding), got " + to_string(ctx.input_shape));
  check_layer_size(spec, ctx, "weight", ctx.input_shape);
  DLSCALE_REQUIRE(ctx.rng != nullptr, "posembedding: no random stream to initialize the weights");
  return std::make_unique<PositionalEmbedding>(spec, ctx.input_shape, ctx.dtype, *ctx.rng);
}

}  // namespace dlscale
