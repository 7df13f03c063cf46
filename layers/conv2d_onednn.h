// The float32 CPU fast path of conv2d: oneDNN's convolution primitives
// (created once per batch size and thread count, executed every step).
// oneDNN picks its blocked layouts; activations already in the one it chose
// (Layout::channels16) pass as they are, others (plain N×C×H×W) are
// reordered to and from it as part of each call. Built from
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

  // Whether the primitives keep the activations in Layout::channels16
  // (runtime/core/tensor.h): on the input side x and dx, on the output side
  // y and dy. Such buffers are passed as they are, with no reorder.
  virtual bool input_blocked() const = 0;
  virtual bool output_blocked() const = 0;

  // An activation buffer and whether it is in Layout::channels16 (allowed
  // only where input_blocked() / output_blocked() say so) or plain.
  template <class P>
  struct Buffer {
    P* data;
    bool blocked;
  };
  // x (N, C, H, W), w (F, C, K, K), b (F) or null; writes y (N, F, OH, OW).
  virtual void forward(Buffer<const float> x, const float* w, const float* b, Buffer<float> y) = 0;
  // x and w as in the last forward, dy (N, F, OH, OW); overwrites dw (F, C, K, K),
  // db (F) when not null and dx (N, C, H, W) when dx.data is not null.
  virtual void backward(Buffer<const float> x, const float* w, Buffer<const float> dy, float* dw, float* db,
                        Buffer<float> dx) = 0;
};

}  // namespace dlscale
