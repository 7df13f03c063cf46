// The float32 CPU fast path of conv2d: oneDNN's convolution primitives
// (created once per batch size and thread count, executed every step).
// Tensors stay N×C×H×W outside; inside, oneDNN picks its blocked layouts and
// the reorders to and from them are part of each call. Built from
// conv2d_onednn.cpp when CMake finds oneDNN, else from conv2d_onednn_stub.cpp,
// whose create() returns null so conv2d keeps its im2col + GEMM path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layers/conv2d.h"

namespace dlscale {

class OnednnConv2d {
 public:
  // Null when this build has no oneDNN or oneDNN cannot run this geometry.
  // winograd: try oneDNN's Winograd kernels before the direct ones.
  static std::unique_ptr<OnednnConv2d> create(const Conv2dGeometry& g, bool bias, std::int64_t batch,
                                              bool winograd = true);
  virtual ~OnednnConv2d() = default;

  // Batch size and thread count the primitives were made for.
  virtual std::int64_t batch() const = 0;
  virtual int threads() const = 0;
  // oneDNN's names of the forward / backward-data / backward-weights kernels.
  virtual std::string implementation() const = 0;

  // x (N, C, H, W), w (F, C, K, K), b (F) or null; writes y (N, F, OH, OW).
  virtual void forward(const float* x, const float* w, const float* b, float* y) = 0;
  // x and w as in the last forward, dy (N, F, OH, OW); overwrites dw (F, C, K, K),
  // db (F) when not null and dx (N, C, H, W) when not null.
  virtual void backward(const float* x, const float* w, const float* dy, float* dw, float* db, float* dx) = 0;
};

}  // namespace dlscale
