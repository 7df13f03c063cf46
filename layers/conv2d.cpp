// CPU conv2d: batch-level im2col + one OpenBLAS GEMM per pass, with the
// layout shuffles and im2col/col2im spread over OpenMP threads.
// The OpenMP loops and the GEMMs alternate, so two thread pools take turns on
// the same cores: with the pthread build of OpenBLAS, idle threads of each pool
// spin while the other works, which costs up to 2x on small machines. Linking
// the OpenMP build of OpenBLAS (one shared pool) or OMP_WAIT_POLICY=PASSIVE avoids it.
//
// Column layout shared by im2col, the GEMMs and col2im, for a chunk of nb samples:
//   cols (C·K·K, nb·P), P = OH·OW, row r = (c·K + kh)·K + kw, column j = i·P + oh·OW + ow
//   cols[r][j] = x[n0+i][c][oh·S - pad_top + kh][ow·S - pad_left + kw]   (0 outside the image)
#include "layers/conv2d.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "layers/conv2d_onednn.h"
#include "runtime/core/blas.h"

namespace dlscale {

namespace {

// Integer division rounding toward -inf / +inf, for b > 0 and any sign of a.
std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }

// Output columns ow whose input column ow·S - pad_left + kw lies inside [0, W):
// [lo, hi). Computing the range once per row keeps bounds checks out of the inner loops.
struct Span {
  std::int64_t lo, hi;
};
Span valid_columns(const Conv2dGeometry& g, std::int64_t kw, std::int64_t ow_count) {
  std::int64_t lo = std::clamp<std::int64_t>(ceil_div(g.pad_left - kw, g.stride), 0, ow_count);
  std::int64_t hi = std::clamp<std::int64_t>(floor_div(g.width - 1 + g.pad_left - kw, g.stride) + 1, lo, ow_count);
  return {lo, hi};
}

// x is (N, C, H, W); writes cols (C·K·K, nb·P) for samples [n0, n0 + nb).
template <class T>
void im2col(const Conv2dGeometry& g, const T* x, std::int64_t n0, std::int64_t nb, T* cols) {
  const std::int64_t K = g.kernel, S = g.stride, H = g.height, W = g.width;
  const std::int64_t OH = g.out_height(), OW = g.out_width(), P = OH * OW;
  const std::int64_t rows = g.channels * K * K, ncols = nb * P;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t i = 0; i < nb; ++i) {
      const std::int64_t c = r / (K * K), kh = (r / K) % K, kw = r % K;
      const Span span = valid_columns(g, kw, OW);
      const T* plane = x + ((n0 + i) * g.channels + c) * H * W;
      T* out = cols + r * ncols + i * P;
      for (std::int64_t oh = 0; oh < OH; ++oh, out += OW) {
        const std::int64_t ih = oh * S - g.pad_top + kh;
        if (ih < 0 || ih >= H) {
          std::fill(out, out + OW, T(0));
          continue;
        }
        const T* src = plane + ih * W;
        const std::int64_t shift = kw - g.pad_left;  // iw = ow·S + shift
        std::fill(out, out + span.lo, T(0));
        if (S == 1) {
          if (span.hi > span.lo) std::memcpy(out + span.lo, src + span.lo + shift, sizeof(T) * (span.hi - span.lo));
        } else {
          for (std::int64_t ow = span.lo; ow < span.hi; ++ow) out[ow] = src[ow * S + shift];
        }
        std::fill(out + span.hi, out + OW, T(0));
      }
    }
  }
}

// Adjoint of im2col: dx (N, C, H, W) += scatter of dcols (C·K·K, nb·P).
// Threads own whole (sample, channel) planes, so the += never races.
template <class T>
void col2im(const Conv2dGeometry& g, const T* dcols, std::int64_t n0, std::int64_t nb, T* dx) {
  const std::int64_t K = g.kernel, S = g.stride, H = g.height, W = g.width, C = g.channels;
  const std::int64_t OH = g.out_height(), OW = g.out_width(), P = OH * OW, ncols = nb * P;
#pragma omp parallel for collapse(2) schedule(static)
  for (std::int64_t i = 0; i < nb; ++i) {
    for (std::int64_t c = 0; c < C; ++c) {
      T* plane = dx + ((n0 + i) * C + c) * H * W;
      for (std::int64_t kh = 0; kh < K; ++kh) {
        for (std::int64_t kw = 0; kw < K; ++kw) {
          const Span span = valid_columns(g, kw, OW);
          const std::int64_t shift = kw - g.pad_left;
          const T* in = dcols + ((c * K + kh) * K + kw) * ncols + i * P;
          for (std::int64_t oh = 0; oh < OH; ++oh, in += OW) {
            const std::int64_t ih = oh * S - g.pad_top + kh;
            if (ih < 0 || ih >= H) continue;
            T* dst = plane + ih * W;
            for (std::int64_t ow = span.lo; ow < span.hi; ++ow) dst[ow * S + shift] += in[ow];
          }
        }
      }
    }
  }
}

// Grows a scratch buffer only when needed, so steady-state steps allocate nothing.
void ensure_scratch(Tensor& buf, std::int64_t elements, DType dtype) {
  if (buf.dtype() != dtype || buf.numel() < elements) buf = Tensor({elements}, dtype);
}

}  // namespace

Conv2d::Conv2d(const Conv2dGeometry& geometry, bool bias, DType dtype, Rng& rng) : g_(geometry), has_bias_(bias) {
  output_shape_ = {g_.filters, g_.out_height(), g_.out_width()};
  const Shape wshape{g_.filters, g_.channels, g_.kernel, g_.kernel};
  weight_ = {"weight", Tensor(wshape, dtype), Tensor(wshape, dtype), true};
  // He-normal over fan_in = C·K·K keeps activation variance steady through ReLUs.
  const double stddev = std::sqrt(2.0 / static_cast<double>(g_.channels * g_.kernel * g_.kernel));
  for (std::int64_t i = 0; i < weight_.value.numel(); ++i) weight_.value.set(i, rng.normal(0.0, stddev));
  if (has_bias_) bias_ = {"bias", Tensor({g_.filters}, dtype), Tensor({g_.filters}, dtype), false};
  // DLSCALE_ONEDNN=0 keeps float32 on im2col + GEMM, =direct skips Winograd (for comparisons, bench/).
  const std::string env = std::getenv("DLSCALE_ONEDNN") ? std::getenv("DLSCALE_ONEDNN") : "";
  onednn_allowed_ = dtype == DType::f32 && env != "0";
  onednn_winograd_ = env != "direct";
}

Conv2d::~Conv2d() = default;

OnednnConv2d* Conv2d::onednn_for(std::int64_t n) {
  if (!onednn_allowed_) return nullptr;
  // Primitives are tuned for one batch size and thread count (oneDNN's own
  // cache makes remaking them for an evaluation batch and back cheap).
  if (!onednn_ || onednn_->batch() != n || onednn_->threads() != cpu_threads()) {
    onednn_ = OnednnConv2d::create(g_, has_bias_, n, onednn_winograd_);
    if (!onednn_) onednn_allowed_ = false;
  }
  return onednn_.get();
}

std::vector<Param*> Conv2d::params() {
  if (has_bias_) return {&weight_, &bias_};
  return {&weight_};
}

std::int64_t Conv2d::samples_per_chunk(std::int64_t batch) const {
  const std::int64_t per_sample = g_.channels * g_.kernel * g_.kernel * g_.out_height() * g_.out_width() *
                                  static_cast<std::int64_t>(size_of(weight_.value.dtype()));
  const std::int64_t fit = static_cast<std::int64_t>(max_scratch_bytes_) / std::max<std::int64_t>(per_sample, 1);
  return std::clamp<std::int64_t>(fit, 1, std::max<std::int64_t>(batch, 1));
}

// x is (N, C, H, W); y is (N, F, OH, OW).
Tensor Conv2d::forward(const Tensor& x, bool) {
  const Shape sample{g_.channels, g_.height, g_.width};
  if (x.rank() != 4 || Shape(x.shape().begin() + 1, x.shape().end()) != sample)
    fail("conv2d: expected input N×" + to_string(sample) + ", got " + to_string(x.shape()));
  if (x.dtype() != weight_.value.dtype())
    fail("conv2d: input is " + to_string(x.dtype()) + " but the parameters are " + to_string(weight_.value.dtype()));
  const std::int64_t N = x.dim(0), F = g_.filters, P = g_.out_height() * g_.out_width();
  const std::int64_t rows = g_.channels * g_.kernel * g_.kernel, chunk = samples_per_chunk(N);
  const Shape y_shape{N, F, g_.out_height(), g_.out_width()};
  forward_via_onednn_ = false;
  if (OnednnConv2d* fast = N > 0 ? onednn_for(N) : nullptr) {
    // Activations in oneDNN's own layout pass without a reorder (x as it
    // comes, y when Network allows blocked outputs); dx takes x's layout.
    x_ = x.blocked() && !fast->input_blocked() ? x.plain() : x;
    const bool y_blocked = blocked_output_allowed_ && fast->output_blocked();
    Tensor y = Tensor::uninitialized(y_shape, x.dtype(), y_blocked ? Layout::channels16 : Layout::plain);
    fast->forward({x_.data_any_layout<float>(), x_.blocked()}, weight_.value.data<float>(),
                  has_bias_ ? bias_.value.data<float>() : nullptr, {y.data_any_layout<float>(), y_blocked});
    forward_via_onednn_ = true;
    return y;
  }
  x_ = x.plain();
  Tensor y = Tensor::uninitialized(y_shape, x.dtype());  // every element written
  ensure_scratch(cols_, rows * chunk * P, x.dtype());
  ensure_scratch(ymat_, F * chunk * P, x.dtype());
  dispatch(x.dtype(), [&]<class T>() {
    const T* px = x_.data<T>();
    const T* pw = weight_.value.data<T>();
    const T* pb = has_bias_ ? bias_.value.data<T>() : nullptr;
    T* cols = cols_.data<T>();
    T* ymat = ymat_.data<T>();
    T* py = y.data<T>();
    for (std::int64_t n0 = 0; n0 < N; n0 += chunk) {
      const std::int64_t nb = std::min(chunk, N - n0), ncols = nb * P;
      im2col(g_, px, n0, nb, cols);
      // ymat (F, nb·P) = W (F, C·K·K) · cols (C·K·K, nb·P)
      gemm<T>(false, false, F, ncols, rows, T(1), pw, cols, T(0), ymat);
      // y[n0+i][f][:] = ymat[f][i·P : (i+1)·P] + b[f]
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t i = 0; i < nb; ++i) {
        for (std::int64_t f = 0; f < F; ++f) {
          const T* src = ymat + f * ncols + i * P;
          T* dst = py + ((n0 + i) * F + f) * P;
          const T b = pb ? pb[f] : T(0);
          for (std::int64_t p = 0; p < P; ++p) dst[p] = src[p] + b;
        }
      }
    }
  });
  cols_hold_batch_ = chunk >= N;
  return y;
}

// dy is (N, F, OH, OW); returns dx (N, C, H, W).
Tensor Conv2d::backward(const Tensor& dy) {
  DLSCALE_REQUIRE(x_.rank() == 4, "conv2d: backward called without a forward");
  const std::int64_t N = x_.dim(0), F = g_.filters, P = g_.out_height() * g_.out_width();
  const Shape expected{N, F, g_.out_height(), g_.out_width()};
  if (dy.shape() != expected || dy.dtype() != x_.dtype())
    fail("conv2d: backward got dL/dy of shape " + to_string(dy.shape()) + " (" + to_string(dy.dtype()) +
         ") but the forward output was " + to_string(expected) + " (" + to_string(x_.dtype()) + ")");
  const std::int64_t rows = g_.channels * g_.kernel * g_.kernel, chunk = samples_per_chunk(N);
  if (forward_via_onednn_) {
    const Tensor g = dy.blocked() && !onednn_->output_blocked() ? dy.plain() : dy;
    Tensor dx = input_grad_needed_ ? Tensor::uninitialized(x_.shape(), x_.dtype(), x_.layout()) : Tensor();
    onednn_->backward({x_.data_any_layout<float>(), x_.blocked()}, weight_.value.data<float>(),
                      {g.data_any_layout<float>(), g.blocked()}, weight_.grad.data<float>(),
                      has_bias_ ? bias_.grad.data<float>() : nullptr,
                      {input_grad_needed_ ? dx.data_any_layout<float>() : nullptr, x_.blocked()});
    forward_via_onednn_ = false;
    return dx;
  }
  // zero-filled: col2im accumulates into it
  Tensor dx = input_grad_needed_ ? Tensor(x_.shape(), x_.dtype()) : Tensor();
  ensure_scratch(cols_, rows * chunk * P, x_.dtype());
  ensure_scratch(ymat_, F * chunk * P, x_.dtype());
  const Tensor dy_plain = dy.plain();
  dispatch(dy.dtype(), [&]<class T>() {
    const T* px = x_.data<T>();
    const T* pdy = dy_plain.data<T>();
    const T* pw = weight_.value.data<T>();
    T* dw = weight_.grad.data<T>();
    T* db = has_bias_ ? bias_.grad.data<T>() : nullptr;
    T* cols = cols_.data<T>();
    T* dymat = ymat_.data<T>();
    T* pdx = input_grad_needed_ ? dx.data<T>() : nullptr;
    for (std::int64_t n0 = 0; n0 < N; n0 += chunk) {
      const std::int64_t nb = std::min(chunk, N - n0), ncols = nb * P;
      const bool first = n0 == 0;  // the first chunk overwrites the grads, later ones add
      const T beta = first ? T(0) : T(1);
      if (!cols_hold_batch_) im2col(g_, px, n0, nb, cols);
      // dymat[f][i·P + p] = dy[n0+i][f][p]
#pragma omp parallel for collapse(2) schedule(static)
      for (std::int64_t f = 0; f < F; ++f)
        for (std::int64_t i = 0; i < nb; ++i)
          std::memcpy(dymat + f * ncols + i * P, pdy + ((n0 + i) * F + f) * P, sizeof(T) * P);
      // dW (F, C·K·K) (+)= dymat (F, nb·P) · colsᵀ (nb·P, C·K·K)
      gemm<T>(false, true, F, rows, ncols, T(1), dymat, cols, beta, dw);
      if (db) {
#pragma omp parallel for schedule(static)
        for (std::int64_t f = 0; f < F; ++f) {
          T s = 0;
          for (std::int64_t j = 0; j < ncols; ++j) s += dymat[f * ncols + j];
          // Not beta * db + s: 0 * NaN is NaN, and a NaN left from a skipped
          // (overflowed) step must not survive into the next one.
          db[f] = first ? s : db[f] + s;
        }
      }
      if (!input_grad_needed_) continue;
      // dcols (C·K·K, nb·P) = Wᵀ (C·K·K, F) · dymat (F, nb·P); cols is free now, reuse it.
      gemm<T>(true, false, rows, ncols, F, T(1), pw, dymat, T(0), cols);
      col2im(g_, cols, n0, nb, pdx);
    }
  });
  cols_hold_batch_ = false;
  return dx;
}

std::unique_ptr<Layer> make_conv2d(const LayerSpec& spec, const LayerContext& ctx) {
  const std::int64_t filters = spec.get_int("filters");
  const std::int64_t kernel = spec.get_int("kernel");
  const std::int64_t stride = spec.get_int("stride", 1);
  const std::string padding = spec.get_string("padding", "0");
  const bool bias = spec.get_bool("bias", true);
  const Shape& in = ctx.input_shape;
  if (in.size() != 3) spec.fail_here("needs a C×H×W input, got " + to_string(in));
  if (filters < 1) spec.fail_here("filters=" + std::to_string(filters) + " must be at least 1");
  if (kernel < 1) spec.fail_here("kernel=" + std::to_string(kernel) + " must be at least 1");
  if (stride < 1) spec.fail_here("stride=" + std::to_string(stride) + " must be at least 1");
  check_layer_value(spec, ctx, "filters", filters);
  check_layer_value(spec, ctx, "kernel", kernel);
  check_layer_value(spec, ctx, "stride", stride);

  Conv2dGeometry g;
  g.channels = in[0], g.height = in[1], g.width = in[2];
  g.filters = filters, g.kernel = kernel, g.stride = stride;
  if (padding == "same") {
    // Output ceil(H/S); the total padding that needs goes half on top, the odd one at the bottom.
    auto split = [&](std::int64_t size, std::int64_t& before, std::int64_t& after) {
      const std::int64_t out = ceil_div(size, stride);
      const std::int64_t total = std::max<std::int64_t>((out - 1) * stride + kernel - size, 0);
      before = total / 2, after = total - before;
    };
    split(g.height, g.pad_top, g.pad_bottom);
    split(g.width, g.pad_left, g.pad_right);
  } else {
    std::int64_t p = -1;
    auto [end, ec] = std::from_chars(padding.data(), padding.data() + padding.size(), p);
    if (ec != std::errc() || end != padding.data() + padding.size() || p < 0)
      spec.fail_here("padding=" + padding + " must be a non-negative integer or 'same'");
    check_layer_value(spec, ctx, "padding", p);
    g.pad_top = g.pad_bottom = g.pad_left = g.pad_right = p;
  }
  const std::int64_t padded_h = g.height + g.pad_top + g.pad_bottom, padded_w = g.width + g.pad_left + g.pad_right;
  if (kernel > padded_h || kernel > padded_w)
    spec.fail_here("kernel " + std::to_string(kernel) + " larger than padded input " + std::to_string(padded_h) +
                   "x" + std::to_string(padded_w));
  check_layer_size(spec, ctx, "weight", {filters, g.channels, kernel, kernel});
  check_layer_size(spec, ctx, "output", {filters, g.out_height(), g.out_width()});
  check_layer_size(spec, ctx, "im2col block of one sample", {g.channels, kernel, kernel, g.out_height(), g.out_width()});
  DLSCALE_REQUIRE(ctx.rng != nullptr, "conv2d: no random stream to initialize the weights");
  return std::make_unique<Conv2d>(g, bias, ctx.dtype, *ctx.rng);
}

}  // namespace dlscale
