// oneDNN float32 convolution for conv2d (see conv2d_onednn.h).
//
// Every operand has an outer memory over the layer's own N×C×H×W / F×C×K×K
// buffers and an inner one in the layout the primitive chose
// (format_tag::any, e.g. nChw16c / OIhw16i16o with AVX-512); when the two
// differ a reorder primitive, made once, copies between them. An activation
// the caller already holds in nChw16c (Layout::channels16) is passed as it is
// when that is the primitive's layout, with no reorder: inside a Network of
// conv, batch norm and ReLU layers no activation is reordered at all. Weights
// change every step, so they are reordered on every call (they are small).
#include "layers/conv2d_onednn.h"

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <unordered_map>

#include "runtime/core/error.h"

namespace dlscale {

namespace {

using dnnl::memory;
using tag = memory::format_tag;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// An operand: outer over the caller's plain buffer, inner in the primitive's
// layout, and `blocked` over a caller's buffer that already is in that layout
// when it is Layout::channels16's (then no reorder is needed).
struct Operand {
  memory outer, inner, blocked;
  dnnl::reorder copy;  // outer → inner for inputs, inner → outer for outputs; empty when the layouts match
  bool flush_pending = false;

  Operand() = default;
  Operand(const memory::desc& outer_md, const memory::desc& inner_md, bool is_output) {
    outer = memory(outer_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (outer_md.dims().size() == 4 && outer_md.dims()[1] % 16 == 0 &&
        inner_md == memory::desc(outer_md.dims(), memory::data_type::f32, tag::nChw16c))
      blocked = memory(inner_md, cpu_engine(), DNNL_MEMORY_NONE);
    if (outer_md == inner_md) {
      inner = outer;
      return;
    }
    // inner's buffer is allocated on first use: activations that always come
    // blocked never need one (for a ResNet those buffers came to 1 GB).
    inner = memory(inner_md, cpu_engine(), DNNL_MEMORY_NONE);
    copy = is_output ? dnnl::reorder(inner, outer) : dnnl::reorder(outer, inner);
  }
  memory& allocated_inner() {
    if (reordered() && !inner.get_data_handle()) inner = memory(inner.get_desc(), cpu_engine());
    return inner;
  }
  bool reordered() const { return static_cast<bool>(copy); }
  bool takes_blocked() const { return static_cast<bool>(blocked); }
  // The memory to pass for input p; a plain one is copied into inner first.
  memory& in(dnnl::stream& s, const float* p, bool is_blocked) {
    if (is_blocked) {
      DLSCALE_REQUIRE(takes_blocked(), "conv2d: a channels16 buffer where oneDNN wants another layout");
      blocked.set_data_handle(const_cast<float*>(p));
      return blocked;
    }
    outer.set_data_handle(const_cast<float*>(p));
    if (reordered()) copy.execute(s, outer, allocated_inner());
    return inner;
  }
  // The memory to pass for output p; call flush() after the primitive wrote it.
  memory& out(float* p, bool is_blocked) {
    flush_pending = !is_blocked && reordered();
    if (is_blocked) {
      DLSCALE_REQUIRE(takes_blocked(), "conv2d: a channels16 buffer where oneDNN wants another layout");
      blocked.set_data_handle(p);
      return blocked;
    }
    outer.set_data_handle(p);
    return allocated_inner();
  }
  void flush(dnnl::stream& s) {
    if (flush_pending) copy.execute(s, inner, outer);
    flush_pending = false;
  }
};

class Impl final : public OnednnConv2d {
 public:
  Impl(const Conv2dGeometry& g, bool bias, std::int64_t batch, bool winograd)
      : batch_(batch), threads_(omp_get_max_threads()) {
    const memory::dims src{batch, g.channels, g.height, g.width}, wei{g.filters, g.channels, g.kernel, g.kernel};
    const memory::dims dst{batch, g.filters, g.out_height(), g.out_width()}, bia{g.filters};
    const memory::dims strides{g.stride, g.stride}, pad_l{g.pad_top, g.pad_left}, pad_r{g.pad_bottom, g.pad_right};
    auto any = [](const memory::dims& d) { return memory::desc(d, memory::data_type::f32, tag::any); };
    const memory::desc plain_src(src, memory::data_type::f32, tag::nchw);
    const memory::desc plain_wei(wei, memory::data_type::f32, tag::oihw);
    const memory::desc plain_dst(dst, memory::data_type::f32, tag::nchw);
    const memory::desc plain_bia = bias ? memory::desc(bia, memory::data_type::f32, tag::x) : memory::desc();
    auto& e = cpu_engine();
    // Winograd F(4x4, 3x3) first where oneDNN has it (3×3, stride 1, channels
    // in multiples of 16): it needs about half the multiplications of the
    // direct kernels (measured on the CNN's second conv: 15 ms against 28 ms
    // for the three passes, one thread), at a float32 error still far below
    // the gradient noise of a mini-batch. Direct convolution otherwise.
    using dnnl::algorithm;
    const algorithm order[] = {algorithm::convolution_winograd, algorithm::convolution_direct};
    // oneDNN also accepts Winograd for 1 input channel, where it was 2.5x
    // slower than direct (the CNN's first layer): only full 16-channel blocks.
    const bool blocks = g.channels % 16 == 0 && g.filters % 16 == 0;
    const int first = winograd && blocks ? 0 : 1;
    dnnl::convolution_forward::primitive_desc fwd;
    for (int a = first; a < 2 && !fwd; ++a)
      fwd = dnnl::convolution_forward::primitive_desc(
          {dnnl::prop_kind::forward_training, order[a], any(src), any(wei), plain_bia, any(dst), strides, pad_l, pad_r},
          e, true);
    if (!fwd) throw dnnl::error(dnnl_unimplemented, "conv2d: no oneDNN forward convolution");
    dnnl::convolution_backward_data::primitive_desc bwd_data;
    for (int a = first; a < 2 && !bwd_data; ++a)
      bwd_data = dnnl::convolution_backward_data::primitive_desc(
          {order[a], any(src), any(wei), any(dst), strides, pad_l, pad_r}, e, fwd, true);
    dnnl::convolution_backward_weights::primitive_desc bwd_weights;
    for (int a = first; a < 2 && !bwd_weights; ++a)
      bwd_weights = dnnl::convolution_backward_weights::primitive_desc(
          {order[a], any(src), any(wei), plain_bia, any(dst), strides, pad_l, pad_r}, e, fwd, true);
    if (!bwd_data || !bwd_weights) throw dnnl::error(dnnl_unimplemented, "conv2d: no oneDNN backward convolution");
    fwd_ = dnnl::convolution_forward(fwd);
    bwd_data_ = dnnl::convolution_backward_data(bwd_data);
    bwd_weights_ = dnnl::convolution_backward_weights(bwd_weights);
    impl_ = std::string(fwd.impl_info_str()) + " / " + bwd_data.impl_info_str() + " / " + bwd_weights.impl_info_str();

    x_fwd_ = Operand(plain_src, fwd.src_desc(), false);
    w_fwd_ = Operand(plain_wei, fwd.weights_desc(), false);
    y_ = Operand(plain_dst, fwd.dst_desc(), true);
    x_bwd_ = Operand(plain_src, bwd_weights.src_desc(), false);
    reuse_x_ = x_fwd_.reordered() && bwd_weights.src_desc() == fwd.src_desc();
    dy_weights_ = Operand(plain_dst, bwd_weights.diff_dst_desc(), false);
    reuse_dy_ = bwd_data.diff_dst_desc() == bwd_weights.diff_dst_desc();
    dy_data_ = Operand(plain_dst, bwd_data.diff_dst_desc(), false);
    dw_ = Operand(plain_wei, bwd_weights.diff_weights_desc(), true);
    w_bwd_ = Operand(plain_wei, bwd_data.weights_desc(), false);
    dx_ = Operand(plain_src, bwd_data.diff_src_desc(), true);
    if (bias) {
      if (bwd_weights.diff_bias_desc() != plain_bia) fail("conv2d: oneDNN chose a blocked bias gradient");
      b_ = memory(plain_bia, e, DNNL_MEMORY_NONE);
      db_ = memory(plain_bia, e, DNNL_MEMORY_NONE);
    }
  }

  std::int64_t batch() const override { return batch_; }
  int threads() const override { return threads_; }
  std::string implementation() const override { return impl_; }
  bool input_blocked() const override {
    return x_fwd_.takes_blocked() && x_bwd_.takes_blocked() && dx_.takes_blocked();
  }
  bool output_blocked() const override {
    return y_.takes_blocked() && dy_weights_.takes_blocked() && dy_data_.takes_blocked();
  }

  void forward(Buffer<const float> x, const float* w, const float* b, Buffer<float> y) override {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, x_fwd_.in(stream_, x.data, x.blocked)},
                                         {DNNL_ARG_WEIGHTS, w_fwd_.in(stream_, w, false)},
                                         {DNNL_ARG_DST, y_.out(y.data, y.blocked)}};
    if (b_) {
      b_.set_data_handle(const_cast<float*>(b));
      args[DNNL_ARG_BIAS] = b_;
    }
    fwd_.execute(stream_, args);
    y_.flush(stream_);
    stream_.wait();
    // A plain x was copied to inner, which backward can use; a blocked one was used in place.
    x_fresh_ = !x.blocked;
  }

  void backward(Buffer<const float> x, const float* w, Buffer<const float> dy, float* dw, float* db,
                Buffer<float> dx) override {
    // The blocked copy of x made by forward serves backward too when both want the same layout.
    const memory& src = reuse_x_ && x_fresh_ && !x.blocked ? x_fwd_.inner : x_bwd_.in(stream_, x.data, x.blocked);
    x_fresh_ = false;
    const memory& ddst = dy_weights_.in(stream_, dy.data, dy.blocked);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst},
                                         {DNNL_ARG_DIFF_WEIGHTS, dw_.out(dw, false)}};
    if (db_ && db) {
      db_.set_data_handle(db);
      args[DNNL_ARG_DIFF_BIAS] = db_;
    }
    bwd_weights_.execute(stream_, args);
    dw_.flush(stream_);
    if (dx.data) {
      const memory& ddst_data = reuse_dy_ ? ddst : dy_data_.in(stream_, dy.data, dy.blocked);
      bwd_data_.execute(stream_, {{DNNL_ARG_DIFF_DST, ddst_data},
                                  {DNNL_ARG_WEIGHTS, w_bwd_.in(stream_, w, false)},
                                  {DNNL_ARG_DIFF_SRC, dx_.out(dx.data, dx.blocked)}});
      dx_.flush(stream_);
    }
    stream_.wait();
  }

 private:
  std::int64_t batch_;
  int threads_;
  std::string impl_;
  dnnl::stream stream_{cpu_engine()};
  dnnl::convolution_forward fwd_;
  dnnl::convolution_backward_data bwd_data_;
  dnnl::convolution_backward_weights bwd_weights_;
  Operand x_fwd_, w_fwd_, y_, x_bwd_, dy_weights_, dy_data_, dw_, w_bwd_, dx_;
  memory b_, db_;
  bool reuse_x_ = false, reuse_dy_ = false, x_fresh_ = false;
};

}  // namespace

std::unique_ptr<OnednnConv2d> OnednnConv2d::create(const Conv2dGeometry& g, bool bias, std::int64_t batch,
                                                   bool winograd) {
  try {
    return std::make_unique<Impl>(g, bias, batch, winograd);
  } catch (const dnnl::error&) {
    return nullptr;  // no oneDNN implementation for this geometry: conv2d keeps im2col + GEMM
  }
}

}  // namespace dlscale
