// Batch normalization, CPU. Each channel is independent, so loops run in
// parallel over channels and each channel's sums run in a fixed order: the
// result does not depend on the thread count. Sums are in double because a
// float32 sum over N*H*W elements loses digits the variance needs.
#include "layers/batchnorm.h"

#include <algorithm>
#include <array>
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
  // Layout::channels16 (float32 images with channels in 16s): y and dx keep x's layout.
  bool takes_blocked_input() const override {
    return dtype_ == DType::f32 && output_shape_.size() == 3 && channels_ % 16 == 0;
  }
  std::map<std::string, double> settings() const override { return {{"momentum", momentum_}, {"epsilon", epsilon_}}; }
  std::vector<Param*> params() override { return {&scale_, &offset_}; }
  std::vector<std::pair<std::string, Tensor*>> buffers() override {
    return {{"running_mean", &running_mean_}, {"running_var", &running_var_}};
  }

  // Network hands batch norm the ReLU that alone reads its output: the
  // blocked path applies it in its normalizing pass and folds its mask into
  // backward's passes (a separate ReLU read and wrote every activation once
  // more each way); the plain path applies it as a pass of its own.
  bool fuse_relu() override {
    relu_ = true;
    return true;
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
    Tensor y = Tensor::uninitialized(x.shape(), dtype_, x.layout());  // every element written below
    inv_std_.assign(channels_, 0.0);
    batch_stats_ = training;
    last_shape_ = x.shape();
    last_layout_ = x.layout();
    if (x.blocked()) {
      xhat_ = Tensor();
      forward_blocked(x, y, training);
      return y;
    }
    // Kept from step to step (the same shape every step): no allocation, no page faults.
    if (xhat_.shape() != x.shape()) xhat_ = Tensor::uninitialized(x.shape(), dtype_);
    dispatch(dtype_, [&]<class T>() {
      forward_impl<T>(x, y, training);
      if (relu_) {
        T* yp = y.data<T>();
        const std::int64_t n = y.numel();
#pragma omp parallel for simd if (n >= kParallelMin)
        for (std::int64_t i = 0; i < n; ++i) yp[i] = yp[i] > T(0) ? yp[i] : T(0);
      }
    });
    relu_out_ = relu_ ? y : Tensor();
    return y;
  }

  Tensor backward(const Tensor& dy) override {
    if (dy.shape() != last_shape_ || dy.dtype() != dtype_ || last_shape_.empty())
      fail(who_ + ": gradient is " + to_string(dy.shape()) + " " + to_string(dy.dtype()) + " but the last output was " +
           to_string(last_shape_) + " " + to_string(dtype_));
    Tensor g = dy.in_layout(last_layout_);
    Tensor dx = Tensor::uninitialized(g.shape(), dtype_, g.layout());  // every element written
    if (g.blocked()) {
      backward_blocked(g, dx);
      x_ = Tensor();
      return dx;
    }
    dispatch(dtype_, [&]<class T>() {
      if (spatial_ == 1)
        return relu_ ? backward_features<T, true>(g, dx, relu_out_.data<T>()) : backward_features<T, false>(g, dx, nullptr);
      if (relu_) {  // dL/d(batch norm's output): dy where the ReLU passed it
        Tensor masked = Tensor::uninitialized(g.shape(), dtype_);
        const T* yp = relu_out_.data<T>();
        const T* gp = g.data<T>();
        T* mp = masked.data<T>();
        const std::int64_t n = g.numel();
#pragma omp parallel for simd if (n >= kParallelMin)
        for (std::int64_t i = 0; i < n; ++i) {
          const T g_i = gp[i];  // loaded outside the select, which then vectorizes (see backward_features)
          mp[i] = yp[i] > T(0) ? g_i : T(0);
        }
        g = masked;
      }
      backward_impl<T>(g, dx);
    });
    relu_out_ = Tensor();
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

  // Channel c's running statistics moved towards its batch mean and
  // variance (biased, over `count` values; the running variance is unbiased).
  template <class T>
  void update_running_stats(std::int64_t c, double mean, double var, double count) {
    T& rm = running_mean_.data<T>()[c];
    T& rv = running_var_.data<T>()[c];
    rm = static_cast<T>((1 - momentum_) * rm + momentum_ * mean);
    rv = static_cast<T>((1 - momentum_) * rv + momentum_ * var * count / (count - 1));
  }

  template <class T>
  void forward_impl(const Tensor& x, Tensor& y, bool training) {
    if (spatial_ == 1) return forward_features<T>(x, y, training);
    const std::int64_t n_batch = x.dim(0), C = channels_, S = spatial_;
    const double count = static_cast<double>(n_batch * S);
    const T* xp = x.data<T>();
    const T* g = scale_.value.data<T>();
    const T* b = offset_.value.data<T>();
    const T* rm = running_mean_.data<T>();
    const T* rv = running_var_.data<T>();
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
        update_running_stats<T>(c, mean, var, count);
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

  // Features (S = 1): a channel's values lie C apart, so the per-channel
  // loops above would stride through memory (half of an MLP's step went to
  // batch norm). These walk the batch row by row with a block of channels
  // innermost, which vectorizes; each channel's sums still add its values
  // sample by sample, channel_sum's order for S = 1, so the results are the
  // same bit for bit and do not depend on the threads.
  static constexpr std::int64_t kFeatureBlock = 256;

  template <class T>
  void forward_features(const Tensor& x, Tensor& y, bool training) {
    const std::int64_t n_batch = x.dim(0), C = channels_;
    const double count = static_cast<double>(n_batch);
    const T* xp = x.data<T>();
    const T* g = scale_.value.data<T>();
    const T* b = offset_.value.data<T>();
    const T* rm = running_mean_.data<T>();
    const T* rv = running_var_.data<T>();
    T* yp = y.data<T>();
    T* xh = xhat_.data<T>();
#pragma omp parallel for if (x.numel() >= kParallelMin)
    for (std::int64_t c0 = 0; c0 < C; c0 += kFeatureBlock) {
      const std::int64_t w = std::min(kFeatureBlock, C - c0);
      double mean[kFeatureBlock], inv[kFeatureBlock];
      if (training) {
        double sum[kFeatureBlock] = {}, sq[kFeatureBlock] = {};
        for (std::int64_t n = 0; n < n_batch; ++n)
          for (std::int64_t j = 0; j < w; ++j) sum[j] += static_cast<double>(xp[n * C + c0 + j]);
        for (std::int64_t j = 0; j < w; ++j) mean[j] = sum[j] / count;
        for (std::int64_t n = 0; n < n_batch; ++n)
          for (std::int64_t j = 0; j < w; ++j) {
            const double d = xp[n * C + c0 + j] - mean[j];
            sq[j] += d * d;
          }
        for (std::int64_t j = 0; j < w; ++j) {
          const std::int64_t c = c0 + j;
          const double var = sq[j] / count;
          update_running_stats<T>(c, mean[j], var, count);
          inv[j] = 1.0 / std::sqrt(var + epsilon_);
        }
      } else {
        for (std::int64_t j = 0; j < w; ++j) {
          mean[j] = rm[c0 + j];
          inv[j] = 1.0 / std::sqrt(static_cast<double>(rv[c0 + j]) + epsilon_);
        }
      }
      for (std::int64_t j = 0; j < w; ++j) inv_std_[c0 + j] = inv[j];
      for (std::int64_t n = 0; n < n_batch; ++n)
        for (std::int64_t j = 0; j < w; ++j) {
          const std::int64_t i = n * C + c0 + j;
          const T h = static_cast<T>((xp[i] - mean[j]) * inv[j]);
          xh[i] = h;
          yp[i] = g[c0 + j] * h + b[c0 + j];
        }
    }
  }

  // relu: with a fused ReLU whose output is relu_y (dy passes where it is positive).
  template <class T, bool relu>
  void backward_features(const Tensor& dy, Tensor& dx, const T* relu_y) {
    const std::int64_t n_batch = dy.dim(0), C = channels_;
    const double count = static_cast<double>(n_batch);
    const T* dyp = dy.data<T>();
    const T* xh = xhat_.data<T>();
    const T* g = scale_.value.data<T>();
    T* dg = scale_.grad.data<T>();
    T* db = offset_.grad.data<T>();
    T* dxp = dx.data<T>();
#pragma omp parallel for if (dy.numel() >= kParallelMin)
    for (std::int64_t c0 = 0; c0 < C; c0 += kFeatureBlock) {
      const std::int64_t w = std::min(kFeatureBlock, C - c0);
      double sum_dy[kFeatureBlock] = {}, sum_dy_xh[kFeatureBlock] = {}, k[kFeatureBlock], mean_dy[kFeatureBlock],
             mean_dy_xh[kFeatureBlock];
      // dL/d(batch norm's output), dy where the ReLU passed it, goes into dx
      // first and is read back: as a pass of its own, with dy loaded whether
      // or not it passes, the select vectorizes (inside the sums' loop, or
      // with the load inside the select, it was a branch on random signs,
      // 6x slower).
      const T* d = dyp;
      if constexpr (relu) {
        for (std::int64_t n = 0; n < n_batch; ++n)
          for (std::int64_t j = 0; j < w; ++j) {
            const std::int64_t i = n * C + c0 + j;
            const T g_i = dyp[i];
            dxp[i] = relu_y[i] > T(0) ? g_i : T(0);
          }
        d = dxp;
      }
      for (std::int64_t n = 0; n < n_batch; ++n)
        for (std::int64_t j = 0; j < w; ++j) {
          const std::int64_t i = n * C + c0 + j;
          sum_dy[j] += static_cast<double>(d[i]);
          sum_dy_xh[j] += static_cast<double>(d[i]) * xh[i];
        }
      for (std::int64_t j = 0; j < w; ++j) {
        const std::int64_t c = c0 + j;
        dg[c] = static_cast<T>(sum_dy_xh[j]);
        db[c] = static_cast<T>(sum_dy[j]);
        k[j] = g[c] * inv_std_[c];
        mean_dy[j] = batch_stats_ ? sum_dy[j] / count : 0.0;
        mean_dy_xh[j] = batch_stats_ ? sum_dy_xh[j] / count : 0.0;
      }
      for (std::int64_t n = 0; n < n_batch; ++n)
        for (std::int64_t j = 0; j < w; ++j) {
          const std::int64_t i = n * C + c0 + j;
          dxp[i] = static_cast<T>(k[j] * (d[i] - mean_dy[j] - xh[i] * mean_dy_xh[j]));
        }
    }
  }

  // Layout::channels16: channel c of sample n is lane c%16 of block c/16,
  // the H·W positions of a block 16 floats apart. Work is split into (block,
  // sample) items, each summing its positions in order into per-lane
  // partials; a channel's total adds its items' partials in sample order.
  // The order depends on the shape only, not on the threads, and with the
  // lanes innermost every loop vectorizes over 16 channels.
  using Lanes = std::array<double, 16>;

  // Two sums per channel: term(i, c, a, b) sets the two terms of element i
  // (channel c); partials_[(block·N + n)·2 + t] hold an item's sums, then
  // total[t][c] adds them over the samples in order.
  template <class Term>
  std::array<std::vector<double>, 2> blocked_sums(std::int64_t n_batch, Term term) {
    const std::int64_t blocks = channels_ / 16, S = spatial_;
    partials_.resize(static_cast<std::size_t>(blocks * n_batch * 2));
#pragma omp parallel for collapse(2) if (n_batch * channels_ * S >= kParallelMin)
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t n = 0; n < n_batch; ++n) {
        Lanes acc0 = {}, acc1 = {};
        const std::int64_t base = (n * blocks + b) * S * 16;
        for (std::int64_t s = 0; s < S; ++s) {
          const std::int64_t i = base + s * 16;
          // The terms in float32 for the 16 lanes, then added in double: two
          // loops the compiler vectorizes (one loop doing both, or terms
          // returned as arrays, stayed scalar).
          float v0[16], v1[16];
#pragma omp simd
          for (int k = 0; k < 16; ++k) term(i + k, b * 16 + k, v0[k], v1[k]);
#pragma omp simd
          for (int k = 0; k < 16; ++k) {
            acc0[k] += v0[k];
            acc1[k] += v1[k];
          }
        }
        partials_[(b * n_batch + n) * 2] = acc0;
        partials_[(b * n_batch + n) * 2 + 1] = acc1;
      }
    std::array<std::vector<double>, 2> total;
    for (int t = 0; t < 2; ++t) total[t].assign(channels_, 0.0);
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t n = 0; n < n_batch; ++n)
        for (int t = 0; t < 2; ++t)
          for (int k = 0; k < 16; ++k) total[t][b * 16 + k] += partials_[(b * n_batch + n) * 2 + t][k];
    return total;
  }

  // For each (block, sample) item in parallel: body(i, k, c) at every
  // position offset i + lane k of channel c.
  template <class Body>
  void blocked_each(std::int64_t n_batch, Body body) const {
    const std::int64_t blocks = channels_ / 16, S = spatial_;
#pragma omp parallel for collapse(2) if (n_batch * channels_ * S >= kParallelMin)
    for (std::int64_t b = 0; b < blocks; ++b)
      for (std::int64_t n = 0; n < n_batch; ++n) {
        const std::int64_t base = (n * blocks + b) * S * 16;
        for (std::int64_t s = 0; s < S; ++s)
#pragma omp simd
          for (int k = 0; k < 16; ++k) body(base + s * 16 + k, k, b * 16 + k);
      }
  }

  // Training: the statistics in one pass, as sums of x - K and (x - K)²
  // with K the channel's first value (a shift inside the data keeps the
  // difference of the two sums accurate, where sums of x and x² would cancel
  // when |mean| >> std), then one normalizing pass. x̂ is not stored:
  // backward recomputes it from x, which the network keeps anyway.
  void forward_blocked(const Tensor& x, Tensor& y, bool training) {
    const std::int64_t n_batch = x.dim(0), S = spatial_;
    const double count = static_cast<double>(n_batch * S);
    const float* xp = x.data_any_layout<float>();
    const float* g = scale_.value.data<float>();
    const float* b = offset_.value.data<float>();
    const float* rm = running_mean_.data<float>();
    const float* rv = running_var_.data<float>();
    std::vector<double> batch_mean(channels_);  // or the running mean in inference
    if (training) {
      std::vector<float> shift(channels_);
      for (std::int64_t c = 0; c < channels_; ++c) shift[c] = xp[(c / 16) * S * 16 + c % 16];  // sample 0, position 0
      const float* k = shift.data();
      const auto sums = blocked_sums(n_batch, [&](std::int64_t i, std::int64_t c, float& d, float& d2) {
        d = xp[i] - k[c];
        d2 = d * d;
      });
      for (std::int64_t c = 0; c < channels_; ++c) {
        const double d_mean = sums[0][c] / count;
        const double var = std::max(0.0, sums[1][c] / count - d_mean * d_mean);  // biased: what normalizes the batch
        batch_mean[c] = shift[c] + d_mean;
        inv_std_[c] = 1.0 / std::sqrt(var + epsilon_);
        update_running_stats<float>(c, batch_mean[c], var, count);
      }
    } else {
      for (std::int64_t c = 0; c < channels_; ++c) {
        batch_mean[c] = rm[c];
        inv_std_[c] = 1.0 / std::sqrt(static_cast<double>(rv[c]) + epsilon_);
      }
    }
    x_ = x;
    // x̂ in float32 from float32 mean and 1/std, as backward recomputes it.
    mean_f_.assign(batch_mean.begin(), batch_mean.end());
    inv_f_.assign(inv_std_.begin(), inv_std_.end());
    float* yp = y.data_any_layout<float>();
    const float* mean = mean_f_.data();
    const float* inv = inv_f_.data();
    if (relu_)
      blocked_each(n_batch, [&](std::int64_t i, int, std::int64_t c) {
        yp[i] = std::max(0.0f, g[c] * ((xp[i] - mean[c]) * inv[c]) + b[c]);
      });
    else
      blocked_each(n_batch, [&](std::int64_t i, int, std::int64_t c) {
        yp[i] = g[c] * ((xp[i] - mean[c]) * inv[c]) + b[c];
      });
  }

  template <bool relu>
  void backward_blocked_impl(const Tensor& dy, Tensor& dx) {
    const std::int64_t n_batch = dy.dim(0);
    const double count = static_cast<double>(n_batch * spatial_);
    const float* dyp = dy.data_any_layout<float>();
    const float* xp = x_.data_any_layout<float>();
    const float* g = scale_.value.data<float>();
    const float* b = offset_.value.data<float>();
    float* dg = scale_.grad.data<float>();
    float* db = offset_.grad.data<float>();
    const float* mean = mean_f_.data();
    const float* inv = inv_f_.data();
    // x̂ and dL/d(batch norm's output) at element i of channel c: dy, or 0
    // where the fused ReLU cut (the sign of forward's output, recomputed).
    const auto sums = blocked_sums(n_batch, [&](std::int64_t i, std::int64_t c, float& d, float& d_xh) {
      const float h = (xp[i] - mean[c]) * inv[c];
      const float dy_i = dyp[i];  // read unconditionally: a select, not a branch
      d = relu && g[c] * h + b[c] <= 0.0f ? 0.0f : dy_i;
      d_xh = d * h;
    });
    std::vector<float> k(channels_), mean_dy(channels_), mean_dy_xh(channels_);
    for (std::int64_t c = 0; c < channels_; ++c) {
      db[c] = static_cast<float>(sums[0][c]);
      dg[c] = static_cast<float>(sums[1][c]);
      k[c] = static_cast<float>(g[c] * inv_std_[c]);
      mean_dy[c] = static_cast<float>(batch_stats_ ? sums[0][c] / count : 0.0);
      mean_dy_xh[c] = static_cast<float>(batch_stats_ ? sums[1][c] / count : 0.0);
    }
    float* dxp = dx.data_any_layout<float>();
    blocked_each(n_batch, [&](std::int64_t i, int, std::int64_t c) {
      const float h = (xp[i] - mean[c]) * inv[c];
      const float dy_i = dyp[i];  // read unconditionally: a select, not a branch
      const float d = relu && g[c] * h + b[c] <= 0.0f ? 0.0f : dy_i;
      dxp[i] = k[c] * (d - mean_dy[c] - h * mean_dy_xh[c]);
    });
  }

  void backward_blocked(const Tensor& dy, Tensor& dx) {
    if (relu_)
      backward_blocked_impl<true>(dy, dx);
    else
      backward_blocked_impl<false>(dy, dx);
  }

  std::string who_;
  DType dtype_;
  std::int64_t channels_, spatial_;
  double momentum_, epsilon_;
  Param scale_, offset_;
  Tensor running_mean_, running_var_;
  // Of the last forward, for backward: normalized input (N, C, S), 1/sqrt(var+eps) per channel.
  Tensor xhat_;                 // plain layout: x̂ of the last forward
  Tensor x_;                    // blocked layout: the last forward's x (x̂ is recomputed from it)
  std::vector<float> mean_f_, inv_f_;  // blocked layout: mean and 1/std as x̂ is computed from them
  Tensor relu_out_;             // plain layout with a fused ReLU: the last output (its mask)
  Shape last_shape_;
  Layout last_layout_ = Layout::plain;
  std::vector<double> inv_std_;
  bool batch_stats_ = false;
  bool relu_ = false;           // applies the ReLU after it (fuse_relu)
  std::vector<Lanes> partials_;  // blocked_sums' per-item sums
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
