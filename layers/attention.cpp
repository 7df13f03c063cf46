// CPU multi-head self-attention. The projections are single GEMMs over all
// N·T positions; scores and values are two GEMMs per (sample, head) on
// contiguous per-head copies of Q, K and V (blas.h's gemm takes no leading
// dimensions, and the copies cost O(T·C) next to the O(T²·C) products).
#include "layers/attention.h"

#include <cmath>
#include <limits>

#include "runtime/core/blas.h"

namespace dlscale {

namespace {

class Attention final : public Layer {
 public:
  Attention(const LayerSpec& spec, const Shape& shape, std::int64_t heads, bool causal, DType dtype, Rng& rng)
      : who_(spec.where() + ": attention"), t_(shape[0]), c_(shape[1]), h_(heads), d_(shape[1] / heads),
        causal_(causal) {
    output_shape_ = shape;
    auto make = [&](const char* name, Shape s, bool regularize) {
      return Param{name, Tensor(s, dtype), Tensor(s, dtype), regularize};
    };
    wqkv_ = make("qkv_weight", {3 * c_, c_}, true);
    bqkv_ = make("qkv_bias", {3 * c_}, false);
    wout_ = make("out_weight", {c_, c_}, true);
    bout_ = make("out_bias", {c_}, false);
    // Glorot-like: keeps the projections' output variance near the input's.
    const double stddev = std::sqrt(1.0 / static_cast<double>(c_));
    for (Param* p : {&wqkv_, &wout_})
      for (std::int64_t i = 0; i < p->value.numel(); ++i) p->value.set(i, rng.normal(0.0, stddev));
  }

  std::string kind() const override { return "attention"; }
  std::vector<Param*> params() override { return {&wqkv_, &bqkv_, &wout_, &bout_}; }
  std::map<std::string, double> settings() const override {
    return {{"heads", static_cast<double>(h_)}, {"causal", causal_ ? 1.0 : 0.0}};
  }

  Tensor forward(const Tensor& x, bool) override {
    check(x, "input");
    n_ = x.dim(0);
    x_ = x;
    Tensor y = Tensor::uninitialized(x.shape(), x.dtype());
    dispatch(x.dtype(), [&]<class T>() { forward_impl<T>(x, y); });
    return y;
  }

  Tensor backward(const Tensor& dy) override {
    if (x_.empty()) fail(who_ + ": backward called without a forward");
    check(dy, "gradient");
    if (dy.dim(0) != n_) fail(who_ + ": backward got a batch of " + std::to_string(dy.dim(0)) + ", forward had " +
                              std::to_string(n_));
    Tensor dx = input_grad_needed_ ? Tensor::uninitialized(x_.shape(), x_.dtype()) : Tensor();
    dispatch(dy.dtype(), [&]<class T>() { backward_impl<T>(dy, dx); });
    x_ = q_ = k_ = v_ = p_ = o_ = Tensor();
    return dx;
  }

 private:
  // Offset of head (s, h)'s T×d block in the (N, H, T, d) copies, and of its
  // T×T block in the (N, H, T, T) probabilities.
  std::int64_t head_block(std::int64_t s, std::int64_t h) const { return (s * h_ + h) * t_ * d_; }
  std::int64_t score_block(std::int64_t s, std::int64_t h) const { return (s * h_ + h) * t_ * t_; }

  // Moves between the row layout (N·T, width) with head h's d columns at
  // `column` + h·d, and the per-head layout (N, H, T, d).
  template <class T>
  void split_heads(const T* rows, std::int64_t width, std::int64_t column, T* heads) const {
    for (std::int64_t s = 0; s < n_; ++s)
      for (std::int64_t h = 0; h < h_; ++h)
        for (std::int64_t t = 0; t < t_; ++t)
          for (std::int64_t e = 0; e < d_; ++e)
            heads[head_block(s, h) + t * d_ + e] = rows[(s * t_ + t) * width + column + h * d_ + e];
  }
  template <class T>
  void merge_heads(const T* heads, std::int64_t width, std::int64_t column, T* rows) const {
    for (std::int64_t s = 0; s < n_; ++s)
      for (std::int64_t h = 0; h < h_; ++h)
        for (std::int64_t t = 0; t < t_; ++t)
          for (std::int64_t e = 0; e < d_; ++e)
            rows[(s * t_ + t) * width + column + h * d_ + e] = heads[head_block(s, h) + t * d_ + e];
  }

  // y (rows, out) = x (rows, in) · Wᵀ + b.
  template <class T>
  static void affine(std::int64_t rows, std::int64_t in, std::int64_t out, const T* x, const Param& w,
                     const Param& b, T* y) {
    const T* pb = b.value.data<T>();
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < out; ++j) y[r * out + j] = pb[j];
    gemm<T>(false, true, rows, out, in, T(1), x, w.value.data<T>(), T(1), y);
  }

  // Row-wise softmax of the T×T scores in place, keys after the query
  // masked (probability 0) when causal.
  template <class T>
  void softmax_rows(T* s) const {
    for (std::int64_t i = 0; i < t_; ++i) {
      T* row = s + i * t_;
      const std::int64_t keys = causal_ ? i + 1 : t_;
      T top = row[0];
      for (std::int64_t j = 1; j < keys; ++j) top = row[j] > top ? row[j] : top;
      T sum = 0;
      for (std::int64_t j = 0; j < keys; ++j) sum += row[j] = std::exp(row[j] - top);
      for (std::int64_t j = 0; j < keys; ++j) row[j] /= sum;
      for (std::int64_t j = keys; j < t_; ++j) row[j] = 0;
    }
  }

  template <class T>
  void forward_impl(const Tensor& x, Tensor& y) {
    const std::int64_t rows = n_ * t_;
    const DType dt = x.dtype();
    Tensor qkv = Tensor::uninitialized({rows, 3 * c_}, dt);
    affine<T>(rows, c_, 3 * c_, x.data<T>(), wqkv_, bqkv_, qkv.data<T>());
    q_ = Tensor::uninitialized({n_, h_, t_, d_}, dt);
    k_ = Tensor::uninitialized({n_, h_, t_, d_}, dt);
    v_ = Tensor::uninitialized({n_, h_, t_, d_}, dt);
    split_heads(qkv.data<T>(), 3 * c_, 0, q_.data<T>());
    split_heads(qkv.data<T>(), 3 * c_, c_, k_.data<T>());
    split_heads(qkv.data<T>(), 3 * c_, 2 * c_, v_.data<T>());
    p_ = Tensor::uninitialized({n_, h_, t_, t_}, dt);
    Tensor heads_out = Tensor::uninitialized({n_, h_, t_, d_}, dt);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d_)));
    // One (sample, head) per iteration, spread over the threads: each head's
    // products are too small (T×T×d) for a threaded GEMM to use more than
    // one core, so a serial loop left the others idle. Every head writes
    // only its own blocks, so the result does not depend on the threads.
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < n_ * h_; ++b) {
      const std::int64_t s = b / h_, h = b % h_;
      T* p = p_.data<T>() + score_block(s, h);
      const std::int64_t at = head_block(s, h);
      gemm<T>(false, true, t_, t_, d_, scale, q_.data<T>() + at, k_.data<T>() + at, T(0), p);
      softmax_rows(p);
      gemm<T>(false, false, t_, d_, t_, T(1), p, v_.data<T>() + at, T(0), heads_out.data<T>() + at);
    }
    o_ = Tensor::uninitialized({rows, c_}, dt);
    merge_heads(heads_out.data<T>(), c_, 0, o_.data<T>());
    affine<T>(rows, c_, c_, o_.data<T>(), wout_, bout_, y.data<T>());
  }

  // dW (out, in) = dyᵀ · x, db = column sums of dy.
  template <class T>
  static void affine_grads(std::int64_t rows, std::int64_t in, std::int64_t out, const T* dy, const T* x, Param& w,
                           Param& b) {
    gemm<T>(true, false, out, in, rows, T(1), dy, x, T(0), w.grad.data<T>());
    T* db = b.grad.data<T>();
    for (std::int64_t j = 0; j < out; ++j) db[j] = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t j = 0; j < out; ++j) db[j] += dy[r * out + j];
  }

  // dS = P ⊙ (dP - rowsum(dP ⊙ P)) · scale, in place of dP. Masked entries
  // have P = 0 and so get no gradient.
  template <class T>
  void softmax_grad(const T* p, T* dp, T scale) const {
    for (std::int64_t i = 0; i < t_; ++i) {
      T dot = 0;
      for (std::int64_t j = 0; j < t_; ++j) dot += dp[i * t_ + j] * p[i * t_ + j];
      for (std::int64_t j = 0; j < t_; ++j) dp[i * t_ + j] = p[i * t_ + j] * (dp[i * t_ + j] - dot) * scale;
    }
  }

  template <class T>
  void backward_impl(const Tensor& dy, Tensor& dx) {
    const std::int64_t rows = n_ * t_;
    const DType dt = dy.dtype();
    const T* g = dy.data<T>();
    Tensor d_o = Tensor::uninitialized({rows, c_}, dt);
    gemm<T>(false, false, rows, c_, c_, T(1), g, wout_.value.data<T>(), T(0), d_o.data<T>());
    affine_grads<T>(rows, c_, c_, g, o_.data<T>(), wout_, bout_);
    Tensor d_heads = Tensor::uninitialized({n_, h_, t_, d_}, dt);
    split_heads(d_o.data<T>(), c_, 0, d_heads.data<T>());
    Tensor dq = Tensor::uninitialized({n_, h_, t_, d_}, dt), dk = Tensor::uninitialized({n_, h_, t_, d_}, dt),
           dv = Tensor::uninitialized({n_, h_, t_, d_}, dt), dps = Tensor::uninitialized({n_, h_, t_, t_}, dt);
    const T scale = static_cast<T>(1.0 / std::sqrt(static_cast<double>(d_)));
    // Heads in parallel, as in forward; each has its own dP block.
#pragma omp parallel for schedule(static)
    for (std::int64_t b = 0; b < n_ * h_; ++b) {
      const std::int64_t s = b / h_, h = b % h_;
      const std::int64_t at = head_block(s, h);
      const T* p = p_.data<T>() + score_block(s, h);
      T* dp = dps.data<T>() + score_block(s, h);
      const T* doh = d_heads.data<T>() + at;
      gemm<T>(false, true, t_, t_, d_, T(1), doh, v_.data<T>() + at, T(0), dp);  // dP = dO Vᵀ
      gemm<T>(true, false, t_, d_, t_, T(1), p, doh, T(0), dv.data<T>() + at);  // dV = Pᵀ dO
      softmax_grad(p, dp, scale);
      gemm<T>(false, false, t_, d_, t_, T(1), dp, k_.data<T>() + at, T(0), dq.data<T>() + at);  // dS K
      gemm<T>(true, false, t_, d_, t_, T(1), dp, q_.data<T>() + at, T(0), dk.data<T>() + at);   // dSᵀ Q
    }
    Tensor dqkv = Tensor::uninitialized({rows, 3 * c_}, dt);
    merge_heads(dq.data<T>(), 3 * c_, 0, dqkv.data<T>());
    merge_heads(dk.data<T>(), 3 * c_, c_, dqkv.data<T>());
    merge_heads(dv.data<T>(), 3 * c_, 2 * c_, dqkv.data<T>());
    affine_grads<T>(rows, c_, 3 * c_, dqkv.data<T>(), x_.data<T>(), wqkv_, bqkv_);
    if (!dx.empty())
      gemm<T>(false, false, rows, c_, 3 * c_, T(1), dqkv.data<T>(), wqkv_.value.data<T>(), T(0), dx.data<T>());
  }

  void check(const Tensor& t, const char* what) const {
    Shape sample(t.shape().begin() + (t.rank() ? 1 : 0), t.shape().end());
    if (t.rank() == 0 || sample != output_shape_ || t.dtype() != wqkv_.value.dtype())
      fail(who_ + ": " + what + " is " + to_string(t.shape()) + " " + to_string(t.dtype()) +
           " but the layer expects N x " + to_string(output_shape_) + " " + to_string(wqkv_.value.dtype()));
  }

  std::string who_;
  std::int64_t t_, c_, h_, d_;
  bool causal_;
  Param wqkv_, bqkv_, wout_, bout_;
  std::int64_t n_ = 0;
  // Kept from the forward for the backward: input, per-head Q K V, the
  // probabilities and the concatenated head outputs.
  Tensor x_, q_, k_, v_, p_, o_;
};

}  // namespace

std::unique_ptr<Layer> make_attention(const LayerSpec& spec, const LayerContext& ctx) {
  const std::int64_t heads = spec.get_int("heads");
  const bool causal = spec.get_bool("causal", false);
  if (ctx.input_shape.size() != 2)
    spec.fail_here("needs a sequence input T×C (after an embedding), got " + to_string(ctx.input_shape));
  const std::int64_t t = ctx.input_shape[0], c = ctx.input_shape[1];
  if (heads < 1 || c % heads != 0)
    spec.fail_here("heads=" + std::to_string(heads) + " must be at least 1 and divide the width " + std::to_string(c));
  check_layer_size(spec, ctx, "qkv_weight", {3 * c, c});
  check_layer_size(spec, ctx, "attention probabilities", {heads, t, t});
  DLSCALE_REQUIRE(ctx.rng != nullptr, "attention: no random stream to initialize the weights");
  return std::make_unique<Attention>(spec, ctx.input_shape, heads, causal, ctx.dtype, *ctx.rng);
}

}  // namespace dlscale
