// CPU max and average pooling: plain loops, one OpenMP task per
// (sample, channel) plane, which is enough since pooling is memory-bound
// once the comparisons do not branch: 2×2 max pooling with stride 2 (the
// usual CNN block) has its own branch-free loop, since a branch per
// comparison on activations mispredicts often (measured 2x on the CNN's
// first pooling layer).
#include "layers/pool2d.h"

#include <algorithm>
#include <cstdint>

namespace dlscale {

namespace {

enum class PoolKind { max, average };

struct PoolGeometry {
  std::int64_t channels, height, width, size, stride, padding;
  std::int64_t out_height() const { return (height + 2 * padding - size) / stride + 1; }
  std::int64_t out_width() const { return (width + 2 * padding - size) / stride + 1; }
};

// The window of output (oh, ow) clipped to the image: rows [h0, h1), columns [w0, w1).
struct Window {
  std::int64_t h0, h1, w0, w1;
};
Window window(const PoolGeometry& g, std::int64_t oh, std::int64_t ow) {
  const std::int64_t hs = oh * g.stride - g.padding, ws = ow * g.stride - g.padding;
  return {std::max<std::int64_t>(hs, 0), std::min(hs + g.size, g.height), std::max<std::int64_t>(ws, 0),
          std::min(ws + g.size, g.width)};
}

class Pool2d : public Layer {
 public:
  Pool2d(PoolKind kind, const PoolGeometry& g) : kind_(kind), g_(g) {
    output_shape_ = {g_.channels, g_.out_height(), g_.out_width()};
  }

  std::string kind() const override { return kind_ == PoolKind::max ? "maxpool" : "avgpool"; }
  std::map<std::string, double> settings() const override {
    return {{"size", double(g_.size)}, {"stride", double(g_.stride)}, {"padding", double(g_.padding)}};
  }

  // x is (N, C, H, W); y is (N, C, OH, OW).
  Tensor forward(const Tensor& x, bool) override {
    const Shape sample{g_.channels, g_.height, g_.width};
    if (x.rank() != 4 || Shape(x.shape().begin() + 1, x.shape().end()) != sample)
      fail(kind() + ": expected input N×" + to_string(sample) + ", got " + to_string(x.shape()));
    input_shape_ = x.shape();
    const std::int64_t planes = x.dim(0) * g_.channels;
    Tensor y = Tensor::uninitialized({x.dim(0), g_.channels, g_.out_height(), g_.out_width()}, x.dtype());
    if (kind_ == PoolKind::max) argmax_.resize(static_cast<std::size_t>(y.numel()));
    dispatch(x.dtype(), [&]<class T>() {
      const T* px = x.data<T>();
      T* py = y.data<T>();
      const bool pairs = kind_ == PoolKind::max && g_.size == 2 && g_.stride == 2 && g_.padding == 0;
#pragma omp parallel for schedule(static)
      for (std::int64_t plane = 0; plane < planes; ++plane) {
        if (pairs)
          max_plane_2x2(px + plane * g_.height * g_.width, py + plane * out_plane(), argmax_.data() + plane * out_plane());
        else if (kind_ == PoolKind::max)
          max_plane(px + plane * g_.height * g_.width, py + plane * out_plane(), argmax_.data() + plane * out_plane());
        else
          avg_plane(px + plane * g_.height * g_.width, py + plane * out_plane());
      }
    });
    return y;
  }

  // dy is (N, C, OH, OW); returns dx (N, C, H, W).
  Tensor backward(const Tensor& dy) override {
    DLSCALE_REQUIRE(input_shape_.size() == 4, kind() + ": backward called without a forward");
    const Shape expected{input_shape_[0], g_.channels, g_.out_height(), g_.out_width()};
    if (dy.shape() != expected)
      fail(kind() + ": backward got dL/dy of shape " + to_string(dy.shape()) + " but the forward output was " +
           to_string(expected));
    const std::int64_t planes = input_shape_[0] * g_.channels;
    // 2×2 windows of stride 2 tile an even-sized plane exactly: every input
    // gets written once, so dx needs no zero-filling first.
    const bool tiles = kind_ == PoolKind::max && g_.size == 2 && g_.stride == 2 && g_.padding == 0 &&
                       g_.height % 2 == 0 && g_.width % 2 == 0;
    // Otherwise zero-filled: windows may overlap or miss inputs, and gradients add.
    Tensor dx = tiles ? Tensor::uninitialized(input_shape_, dy.dtype()) : Tensor(input_shape_, dy.dtype());
    dispatch(dy.dtype(), [&]<class T>() {
      const T* pdy = dy.data<T>();
      T* pdx = dx.data<T>();
#pragma omp parallel for schedule(static)
      for (std::int64_t plane = 0; plane < planes; ++plane) {
        const T* d = pdy + plane * out_plane();
        T* out = pdx + plane * g_.height * g_.width;
        if (tiles) {
          max_plane_2x2_backward(d, argmax_.data() + plane * out_plane(), out);
        } else if (kind_ == PoolKind::max) {
          const std::int32_t* idx = argmax_.data() + plane * out_plane();
          for (std::int64_t o = 0; o < out_plane(); ++o) out[idx[o]] += d[o];
        } else {
          avg_plane_backward(d, out);
        }
      }
    });
    return dx;
  }

 private:
  std::int64_t out_plane() const { return g_.out_height() * g_.out_width(); }

  // x is (H, W), y and argmax are (OH, OW); argmax holds h·W + w of the chosen input.
  template <class T>
  void max_plane(const T* x, T* y, std::int32_t* argmax) const {
    for (std::int64_t oh = 0; oh < g_.out_height(); ++oh) {
      for (std::int64_t ow = 0; ow < g_.out_width(); ++ow) {
        const Window w = window(g_, oh, ow);
        // Seeded with a real element (never -inf) so NaN inputs still give a valid index.
        std::int64_t best = w.h0 * g_.width + w.w0;
        for (std::int64_t h = w.h0; h < w.h1; ++h)
          for (std::int64_t c = w.w0; c < w.w1; ++c)
            if (x[h * g_.width + c] > x[best]) best = h * g_.width + c;
        y[oh * g_.out_width() + ow] = x[best];
        argmax[oh * g_.out_width() + ow] = static_cast<std::int32_t>(best);
      }
    }
  }

  // max_plane for size 2, stride 2, no padding: no window is clipped, and
  // selects replace branches. Same choice as max_plane: the first of equal
  // maxima in row-major order wins, NaN is never chosen over a number seen first.
  template <class T>
  void max_plane_2x2(const T* x, T* y, std::int32_t* argmax) const {
    const std::int64_t W = g_.width, OW = g_.out_width();
    for (std::int64_t oh = 0; oh < g_.out_height(); ++oh) {
      const T* r0 = x + 2 * oh * W;
      const T* r1 = r0 + W;
      T* yo = y + oh * OW;
      std::int32_t* ao = argmax + oh * OW;
      for (std::int64_t ow = 0; ow < OW; ++ow) {
        const auto first = static_cast<std::int32_t>(2 * oh * W + 2 * ow);
        T best = r0[2 * ow];
        std::int32_t at = first;
        const T candidates[3] = {r0[2 * ow + 1], r1[2 * ow], r1[2 * ow + 1]};
        const std::int32_t offsets[3] = {1, static_cast<std::int32_t>(W), static_cast<std::int32_t>(W + 1)};
        for (int c = 0; c < 3; ++c) {
          // Arithmetic, not ?:, for the index: GCC turned the select into a
          // branch in the loop's scalar tail. std::max(best, v) keeps best on
          // ties and NaN, as "v > best" does, and is one maxss.
          const std::int32_t larger = candidates[c] > best;
          at += (first + offsets[c] - at) & -larger;
          best = std::max(best, candidates[c]);
        }
        yo[ow] = best;
        ao[ow] = at;
      }
    }
  }

  // dx (H, W) of an even-sized plane from dy (OH, OW): each 2×2 window gets
  // dy at its argmax and 0 elsewhere.
  template <class T>
  void max_plane_2x2_backward(const T* dy, const std::int32_t* argmax, T* dx) const {
    const std::int64_t W = g_.width, OW = g_.out_width();
    for (std::int64_t oh = 0; oh < g_.out_height(); ++oh) {
      T* r0 = dx + 2 * oh * W;
      T* r1 = r0 + W;
      for (std::int64_t ow = 0; ow < OW; ++ow) r0[2 * ow] = r0[2 * ow + 1] = r1[2 * ow] = r1[2 * ow + 1] = T(0);
      for (std::int64_t ow = 0; ow < OW; ++ow) dx[argmax[oh * OW + ow]] = dy[oh * OW + ow];
    }
  }

  template <class T>
  void avg_plane(const T* x, T* y) const {
    const T scale = T(1) / static_cast<T>(g_.size * g_.size);
    for (std::int64_t oh = 0; oh < g_.out_height(); ++oh) {
      for (std::int64_t ow = 0; ow < g_.out_width(); ++ow) {
        const Window w = window(g_, oh, ow);
        T s = 0;
        for (std::int64_t h = w.h0; h < w.h1; ++h)
          for (std::int64_t c = w.w0; c < w.w1; ++c) s += x[h * g_.width + c];
        y[oh * g_.out_width() + ow] = s * scale;
      }
    }
  }

  template <class T>
  void avg_plane_backward(const T* dy, T* dx) const {
    const T scale = T(1) / static_cast<T>(g_.size * g_.size);
    for (std::int64_t oh = 0; oh < g_.out_height(); ++oh) {
      for (std::int64_t ow = 0; ow < g_.out_width(); ++ow) {
        const Window w = window(g_, oh, ow);
        const T d = dy[oh * g_.out_width() + ow] * scale;
        for (std::int64_t h = w.h0; h < w.h1; ++h)
          for (std::int64_t c = w.w0; c < w.w1; ++c) dx[h * g_.width + c] += d;
      }
    }
  }

  PoolKind kind_;
  PoolGeometry g_;
  Shape input_shape_;                // (N, C, H, W) of the last forward
  std::vector<std::int32_t> argmax_; // (N, C, OH, OW), maxpool only
};

std::unique_ptr<Layer> make_pool(PoolKind kind, const LayerSpec& spec, const LayerContext& ctx) {
  const std::int64_t size = spec.get_int("size");
  const std::int64_t stride = spec.get_int("stride", size);
  const std::int64_t padding = spec.get_int("padding", 0);
  const Shape& in = ctx.input_shape;
  if (in.size() != 3) spec.fail_here("needs a C×H×W input, got " + to_string(in));
  if (size < 1) spec.fail_here("size=" + std::to_string(size) + " must be at least 1");
  if (stride < 1) spec.fail_here("stride=" + std::to_string(stride) + " must be at least 1");
  check_layer_value(spec, ctx, "size", size);
  check_layer_value(spec, ctx, "stride", stride);
  if (padding < 0 || padding >= size)
    spec.fail_here("padding=" + std::to_string(padding) + " must be between 0 and size-1 = " +
                   std::to_string(size - 1));
  const PoolGeometry g{in[0], in[1], in[2], size, stride, padding};
  if (size > g.height + 2 * padding || size > g.width + 2 * padding)
    spec.fail_here("size " + std::to_string(size) + " larger than padded input " +
                   std::to_string(g.height + 2 * padding) + "x" + std::to_string(g.width + 2 * padding));
  if (g.height * g.width > INT32_MAX) spec.fail_here("input plane " + to_string(in) + " is too large");
  check_layer_size(spec, ctx, "output", {g.channels, g.out_height(), g.out_width()});
  return std::make_unique<Pool2d>(kind, g);
}

}  // namespace

std::unique_ptr<Layer> make_maxpool(const LayerSpec& spec, const LayerContext& ctx) {
  return make_pool(PoolKind::max, spec, ctx);
}

std::unique_ptr<Layer> make_avgpool(const LayerSpec& spec, const LayerContext& ctx) {
  return make_pool(PoolKind::average, spec, ctx);
}

}  // namespace dlscale
