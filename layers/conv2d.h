// 2-D convolution (cross-correlation, as in every DL framework):
//   `conv2d filters=F kernel=K [stride=1] [padding=0 | padding=same] [bias=true]`
// Input sample C×H×W, output F×OH×OW, weight (F, C, K, K), bias (F).
// padding=P pads every side by P zeros: OH = (H + 2P - K) / S + 1 (floor).
// padding=same gives OH = ceil(H / S); when the padding needed is odd the
// extra row/column goes to the bottom/right (as MATLAB and TensorFlow do).
//
// The CPU path lowers the whole batch with im2col into one
// (C·K·K) × (N·OH·OW) matrix and runs one multithreaded GEMM; the class is
// public so tests can shrink the scratch limit and exercise chunking.
// float32 takes oneDNN's convolutions instead when the build has oneDNN
// (conv2d_onednn.h: Winograd where it applies, else direct kernels;
// DLSCALE_ONEDNN=0 in the environment turns oneDNN off, =direct Winograd).
#pragma once

#include <cstddef>
#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {

class OnednnConv2d;

struct Conv2dGeometry {
  std::int64_t channels = 0, height = 0, width = 0;  // input C×H×W
  std::int64_t filters = 0, kernel = 0, stride = 1;
  std::int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;

  std::int64_t out_height() const { return (height + pad_top + pad_bottom - kernel) / stride + 1; }
  std::int64_t out_width() const { return (width + pad_left + pad_right - kernel) / stride + 1; }
};

class Conv2d : public Layer {
 public:
  // He-normal weights (fan_in = C·K·K) drawn from rng, zero bias.
  Conv2d(const Conv2dGeometry& geometry, bool bias, DType dtype, Rng& rng);
  ~Conv2d() override;

  std::string kind() const override { return "conv2d"; }
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;
  std::vector<Param*> params() override;
  bool takes_blocked_input() const override { return true; }

  const Conv2dGeometry& geometry() const { return g_; }
  // Upper bound on the im2col buffer. A batch whose columns do not fit is
  // processed in chunks of whole samples (and backward then recomputes the
  // columns instead of reusing those of forward).
  void set_max_scratch_bytes(std::size_t bytes) { max_scratch_bytes_ = bytes; }

 private:
  std::int64_t samples_per_chunk(std::int64_t batch) const;
  // The oneDNN primitives for a float32 batch of n, made on first use; null when not usable.
  OnednnConv2d* onednn_for(std::int64_t n);

  Conv2dGeometry g_;
  bool has_bias_;
  Param weight_, bias_;
  Tensor x_;            // forward input (N, C, H, W), plain or in the oneDNN path's blocked layout
  Tensor cols_;         // scratch: (C·K·K, chunk·OH·OW), also holds dcols in backward
  Tensor ymat_;         // scratch: (F, chunk·OH·OW), y or dy in GEMM layout
  bool cols_hold_batch_ = false;  // cols_ is im2col of all of x_ (one chunk)
  std::size_t max_scratch_bytes_ = std::size_t(512) << 20;
  std::unique_ptr<OnednnConv2d> onednn_;
  bool onednn_allowed_ = true;     // false: not built, rejected this geometry, or DLSCALE_ONEDNN=0
  bool onednn_winograd_ = true;   // false: DLSCALE_ONEDNN=direct
  bool forward_via_onednn_ = false;
};

std::unique_ptr<Layer> make_conv2d(const LayerSpec& spec, const LayerContext& ctx);

}  // namespace dlscale
