// Batch normalization, CPU. Each channel is independent, so loops run in
// parallel over channels and each channel's sums run in a fixed order: the
// result does not depend on the thread count. Sums are in double because a
// float32 sum over N*H*W elements loses digits the variance needs.
#include "layers/batchnorm.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace dlscale {

namespace {
constexpr std::int64_t kParallelMin = 1 << 15;

class BatchNorm final : public Layer {
 public:
  BatchNorm(const LayerSpec& spec, const LayerContext& ctx, double momentum, double epsilon)
      : who_(spec.where() + ": batchnorm"),
        dtype_(ctx.dtype),
        channels_(ctx.input_shape[0]),
        spatial_(numel(ctx.input_shape) / ctx.input_shape[0]),
        momentum_(momentum),
        epsilon_(epsilon),
        running_mean_({channels_}, dtype_),
        running_var_({channels_}, dtype_) {
    output_shape_ = ctx.input_shape;
    scale_ = {"scale", Tensor({channels_}, dtype_), Tensor({channels_}, dtype_), false};
    offset_ = {"offset", Tensor({channels_}, dtype_), Tensor({channels_}, dtype_), false};
    for (std::int64_t c = 0; c < channels_; ++c) {
      scale_.value.set(c, 1.0);
      running_var_.set(c, 1.0);
    }
  }

  std::string kind() const override { return "batchnorm"; }
  std::map<std::string, double> settings() const override { return {{"momentum", momentum_}, {"epsilon", epsilon_}}; }
  std::vector<Param*> params() override { return {&scale_, &offset_}; }
  std::vector<std::pair<std::string, Tensor*>> buffers() override {
    return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
  }

  // x, y are (N, C, S) in memory, S = H*W (1 for feature input).
  Tensor forward(const Tensor& x, bool training) override {
    Shape sample(x.shape().begin() + (x.rank() > 0 ? 1 : 0), x.shape().end());
    if (x.rank() == 0 || sample != output_shape_ || x.dtype() != dtype_)
      fail(who_ + ": input is " + to_string(x.shape()) + " " + to_string(x.dtype()) + " but the layer expects N x " +
           to_string(output_shape_) + " " + to_string(dtype_));
    const std::int64_t count = x.dim(0) * spatial_;
    if (training && count < 2)
      fail(who_ + ": training needs more than one value per channel, got a batch of " + to_string(x.shape()));
    Tensor y = Tensor::uninitialized(x.shape(), dtype_);  // every element written below
    // Kept from step to step (the same shape every step): no allocation, no page faults.
    if (xhat_.shape() != x.shape()) xhat_ = Tensor::uninitialized(x.shape(), dtype_);
    inv_std_.assign(channels_, 0.0);
    batch_stats_ = training;
    dispatch(dtype_, [&]<class T>() { forward_impl<T>(x, y, training); });
    return y;
  }

  Tensor backward(const Tensor& dy) override {
    if (dy.shape() != xhat_.shape() || dy.dtype() != dtype_ || xhat_.rank() == 0)
      fail(who_ + ": gradient is " + to_string(dy.shape()) + " " + to_string(dy.dtype()) + " but the last output was " +
           to_string(xhat_.shape()) + " " + to_string(dtype_));
    Tensor dx = Tensor::uninitialized(dy.shape(), dtype_);  // every element written
    dispatch(dtype_, [&]<class T>() { backward_impl<T>(dy, dx); });
    return dx;
  }

 private:
  // Sum of term(i) over channel c's N·S elements, in double. One running sum
  // is one dependent add per element (a quarter of the ResNet's CPU time
  // went to batch norm's sums, perf); eight interleaved partial sums added
  // in a fixed order at the end let the loop vectorize, and the order
  // depends only on S, not on the threads or the alignment.
  template <class Term>
  static double channel_sum(std::int64_t n_batch, std::int64_t C, std::int64_t c, std::int64_t S, Term term) {
    double acc[8] = {};
    for (std::int64_t n = 0; n < n_batch; ++n) {
      const std::int64_t base = (n * C + c) * S;
      std::int64_t s = 0;
      for (; s + 8 <= S; s += 8)
        for (int k = 0; k < 8; ++k) acc[k] += term(base + s + k);
      for (; s < S; ++s) acc[0] += term(base + s);
    }
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  }

  // channel_sum of two terms in one pass over the channel (backward reads
  // dy once for both of its sums); each sum is added in channel_sum's order.
  template <class TermA, class TermB>
  static std::pair<double, double> channel_sums(std::int64_t n_batch, std::int64_t C, std::int64_t c, std::int64_t S,
                                                TermA a, TermB b) {
    double acc_a[8] = {}, acc_b[8] = {};
    for (std::int64_t n = 0; n < n_batch; ++n) {
      const std::int64_t base = (n * C + c) * S;
      std::int64_t s = 0;
      for (; s + 8 <= S; s += 8)
        for (int k = 0; k < 8; ++k) {
          acc_a[k] += a(base + s + k);
          acc_b[k] += b(base + s + k);
        }
      for (; s < S; ++s) {
        acc_a[0] += a(base + s);
        acc_b[0] += b(base + s);
      }
    }
    const auto total = [](const double* x) { return ((x[0] + x[1]) + (x[2] + x[3])) + ((x[4] + x[5]) + (x[6] + x[7])); };
    return {total(acc_a), total(acc_b)};
  }

  template <class T>
  void forward_impl(const Tensor& x, Tensor& y, bool training) {
    const std::int64_t n_batch = x.dim(0), C = channels_, S = spatial_;
    const double count = static_cast<double>(n_batch * S);
    const T* xp = x.data<T>();
    const T* g = scale_.value.data<T>();
    const T* b = offset_.value.data<T>();
    T* rm = running_mean_.data<T>();
    T* rv = running_var_.data<T>();
    T* yp = y.data<T>();
    T* xh = xhat_.data<T>();
#pragma omp parallel for if (x.numel() >= kParallelMin)
    for (std::int64_t c = 0; c < C; ++c) {
      double mean, var;
      if (training) {
        // Two passes: the mean first, then squared deviations, which stays
        // accurate when |mean| >> std.
        mean = channel_sum(n_batch, C, c, S, [&](std::int64_t i) { return static_cast<double>(xp[i]); }) / count;
        const double m = mean;
        const double sq = channel_sum(n_batch, C, c, S, [&](std::int64_t i) {
          const double d = xp[i] - m;
          return d * d;
        });
        var = sq / count;  // biased: what normalizes the batch
        rm[c] = static_cast<T>((1 - momentum_) * rm[c] + momentum_ * mean);
        rv[c] = static_cast<T>((1 - momentum_) * rv[c] + momentum_ * var * count / (count - 1));
      } else {
        mean = rm[c];
        var = rv[c];
      }
      const double inv = 1.0 / std::sqrt(var + epsilon_);
      inv_std_[c] = inv;
      for (std::int64_t n = 0; n < n_batch; ++n)
        for (std::int64_t s = 0; s < S; ++s) {
          const std::int64_t i = (n * C + c) * S + s;
          const T h = static_cast<T>((xp[i] - mean) * inv);
          xh[i] = h;
          yp[i] = g[c] * h + b[c];
        }
    }
  }

  // With batch statistics, mean and var depend on x:
  //   dx = scale * inv_std * (dy - mean(dy) - xhat * mean(dy * xhat)).
  // With running statistics they are constants: dx = scale * inv_std * dy.
  template <class T>
  void backward_impl(const Tensor& dy, Tensor& dx) {
    const std::int64_t n_batch = dy.dim(0), C = channels_, S = spatial_;
    const double count = static_cast<double>(n_batch * S);
    const T* dyp = dy.data<T>();
    const T* xh = xhat_.data<T>();
    const T* g = scale_.value.data<T>();
    T* dg = scale_.grad.data<T>();
    T* db = offset_.grad.data<T>();
    T* dxp = dx.data<T>();
#pragma omp parallel for if (dy.numel() >= kParallelMin)
    for (std::int64_t c = 0; c < C; ++c) {
      const auto [sum_dy, sum_dy_xh] = channel_sums(
          n_batch, C, c, S, [&](std::int64_t i) { return static_cast<double>(dyp[i]); },
          [&](std::int64_t i) { return static_cast<double>(dyp[i]) * xh[i]; });
      dg[c] = static_cast<T>(sum_dy_xh);
      db[c] = static_cast<T>(sum_dy);
      const double k = g[c] * inv_std_[c];
      const double mean_dy = batch_stats_ ? sum_dy / count : 0.0;
      const double mean_dy_xh = batch_stats_ ? sum_dy_xh / count : 0.0;
      for (std::int64_t n = 0; n < n_batch; ++n)
        for (std::int64_t s = 0; s < S; ++s) {
          const std::int64_t i = (n * C + c) * S + s;
          dxp[i] = static_cast<T>(k * (dyp[i] - mean_dy - xh[i] * mean_dy_xh));
        }
    }
  }

  std::string who_;
  DType dtype_;
  std::int64_t channels_, spatial_;
  double momentum_, epsilon_;
  Param scale_, offset_;
  Tensor running_mean_, running_var_;
  // Of the last forward, for backward: normalized input (N, C, S), 1/sqrt(var+eps) per channel.
  Tensor xhat_;
  std::vector<double> inv_std_;
  bool batch_stats_ = false;
};
}  // namespace

std::unique_ptr<Layer> make_batchnorm(const LayerSpec& spec, const LayerContext& ctx) {
  const Shape& in = ctx.input_shape;
  if (in.size() != 1 && in.size() != 3)
    spec.fail_here("input must be C x H x W or F per sample, got " + to_string(in));
  for (auto d : in)
    if (d <= 0) spec.fail_here("input shape " + to_string(in) + " has an empty dimension");
  const double momentum = spec.get_double("momentum", 0.1);
  const double epsilon = spec.get_double("epsilon", 1e-5);
  if (!(momentum >= 0 && momentum <= 1))
    spec.fail_here("momentum must be in [0, 1], got " + spec.get_string("momentum", ""));
  if (!(epsilon > 0 && std::isfinite(epsilon)))
    spec.fail_here("epsilon must be a positive number, got " + spec.get_string("epsilon", ""));
  return std::make_unique<BatchNorm>(spec, ctx, momentum, epsilon);
}

}  // namespace dlscale
