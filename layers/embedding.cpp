// CPU token embedding: a gather forward, a scatter-add backward.
#include "layers/embedding.h"

#include <cmath>

namespace dlscale {

namespace {

class Embedding final : public Layer {
 public:
  Embedding(const LayerSpec& spec, std::int64_t context, std::int64_t vocab, std::int64_t dim, DType dtype, Rng& rng)
      : who_(spec.where() + ": embedding"), context_(context), vocab_(vocab), dim_(dim) {
    output_shape_ = {context, dim};
    weight_ = {"weight", Tensor({vocab, dim}, dtype), Tensor({vocab, dim}, dtype), true};
    // GPT-2's scale: small next to the unit-variance layer-norm outputs.
    for (std::int64_t i = 0; i < weight_.value.numel(); ++i) weight_.value.set(i, rng.normal(0.0, 0.02));
  }

  std::string kind() const override { return "embedding"; }
  std::vector<Param*> params() override { return {&weight_}; }
  std::map<std::string, double> settings() const override {
    return {{"vocab", static_cast<double>(vocab_)}, {"dim", static_cast<double>(dim_)}};
  }

  Tensor forward(const Tensor& x, bool) override {
    if (x.rank() != 2 || x.dim(1) != context_ || x.dtype() != weight_.value.dtype())
      fail(who_ + ": input is " + to_string(x.shape()) + " " + to_string(x.dtype()) + " but the layer expects N x " +
           std::to_string(context_) + " token ids as " + to_string(weight_.value.dtype()));
    ids_ = token_ids(x);
    const std::int64_t rows = x.numel();
    Tensor y = Tensor::uninitialized({x.dim(0), context_, dim_}, x.dtype());
    dispatch(x.dtype(), [&]<class T>() {
      const T* w = weight_.value.data<T>();
      T* py = y.data<T>();
#pragma omp parallel for if (rows * dim_ > 65536)
      for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < dim_; ++c) py[r * dim_ + c] = w[ids_[r] * dim_ + c];
    });
    batch_ = x.dim(0);
    return y;
  }

  Tensor backward(const Tensor& dy) override {
    if (ids_.empty() || dy.shape() != Shape({batch_, context_, dim_}) || dy.dtype() != weight_.value.dtype())
      fail(who_ + ": backward got dL/dy " + to_string(dy.shape()) + " but the last forward gave " +
           to_string(Shape{batch_, context_, dim_}) + (ids_.empty() ? " (or none was run)" : ""));
    dispatch(dy.dtype(), [&]<class T>() {
      T* dw = weight_.grad.data<T>();
      const T* g = dy.data<T>();
      for (std::int64_t i = 0; i < weight_.grad.numel(); ++i) dw[i] = 0;
      // Serial in row order: a token repeated in the batch sums the same way
      // whatever the thread count (deterministic mode).
      for (std::size_t r = 0; r < ids_.size(); ++r)
        for (std::int64_t c = 0; c < dim_; ++c) dw[ids_[r] * dim_ + c] += g[r * dim_ + c];
    });
    ids_.clear();
    return input_grad_needed_ ? Tensor({batch_, context_}, dy.dtype()) : Tensor();
  }

 private:
  std::vector<std::int64_t> token_ids(const Tensor& x) const {
    std::vector<std::int64_t> ids(x.numel());
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double v = x.at(i);
      const double id = std::nearbyint(v);
      if (!(id >= 0 && id < static_cast<double>(vocab_)))
        fail(who_ + ": token id " + std::to_string(v) + " of sample " + std::to_string(i / context_) +
             " at position " + std::to_string(i % context_) + " is outside [0, " + std::to_string(vocab_) + ")");
      ids[i] = static_cast<std::int64_t>(id);
    }
    return ids;
  }

  std::string who_;
  std::int64_t context_, vocab_, dim_;
  Param weight_;
  std::vector<std::int64_t> ids_;  // of the last forward, for the scatter-add
  std::int64_t batch_ = 0;
};

}  // namespace

std::unique_ptr<Layer> make_embedding(const LayerSpec& spec, const LayerContext& ctx) {
  const std::int64_t vocab = spec.get_int("vocab"), dim = spec.get_int("dim");
  if (vocab < 1 || dim < 1) spec.fail_here("vocab and dim must be at least 1");
  if (ctx.input_shape.size() != 1)
    spec.fail_here("needs a sample of T token ids (input shape T), got " + to_string(ctx.input_shape));
  check_layer_size(spec, ctx, "weight", {vocab, dim});
  check_layer_size(spec, ctx, "output", {ctx.input_shape[0], dim});
  DLSCALE_REQUIRE(ctx.rng != nullptr, "embedding: no random stream to initialize the weights");
  return std::make_unique<Embedding>(spec, ctx.input_shape[0], vocab, dim, ctx.dtype, *ctx.rng);
}

}  // namespace dlscale
