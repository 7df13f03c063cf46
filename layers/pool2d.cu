// CUDA max and average pooling (layers/pool2d.cpp) as plain kernels rather
// than cuDNN: pool2d.h promises that a tied maximum sends its gradient to the
// first maximum of the window, which cuDNN does not document, and that is
// what a ReLU's zeros make common. Forward records that index as the CPU
// does. Backward is a gather, one thread per input element adding the
// windows that cover it in the CPU's (oh, ow) order: no atomics, and the
// float sums are the CPU's, bit for bit.
#include <string>

#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

struct Geometry {
  std::int64_t height, width, size, stride, padding, out_height, out_width;
};

Geometry geometry_of(const PoolShape& s) {
  return {s.height, s.width, s.size, s.stride, s.padding, s.out_height(), s.out_width()};
}

__global__ void pool_forward(bool max, Geometry g, std::int64_t total, const float* __restrict__ x,
                             float* __restrict__ y, std::int32_t* __restrict__ argmax) {
  const std::int64_t out_plane = g.out_height * g.out_width;
  const float scale = 1.f / static_cast<float>(g.size * g.size);
  for (std::int64_t o = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; o < total;
       o += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t plane = o / out_plane, rest = o % out_plane;
    const std::int64_t oh = rest / g.out_width, ow = rest % g.out_width;
    const float* xp = x + plane * g.height * g.width;
    const std::int64_t hs = oh * g.stride - g.padding, ws = ow * g.stride - g.padding;
    const std::int64_t h0 = hs > 0 ? hs : 0, h1 = hs + g.size < g.height ? hs + g.size : g.height;
    const std::int64_t w0 = ws > 0 ? ws : 0, w1 = ws + g.size < g.width ? ws + g.size : g.width;
    if (max) {
      // Seeded with a real element, so NaN inputs still give a valid index.
      std::int64_t best = h0 * g.width + w0;
      for (std::int64_t h = h0; h < h1; ++h)
        for (std::int64_t c = w0; c < w1; ++c)
          if (xp[h * g.width + c] > xp[best]) best = h * g.width + c;
      y[o] = xp[best];
      argmax[o] = static_cast<std::int32_t>(best);
    } else {
      float s = 0.f;
      for (std::int64_t h = h0; h < h1; ++h)
        for (std::int64_t c = w0; c < w1; ++c) s += xp[h * g.width + c];
      y[o] = s * scale;
    }
  }
}

__global__ void pool_backward(bool max, Geometry g, std::int64_t total, const float* __restrict__ dy,
                              const std::int32_t* __restrict__ argmax, float* __restrict__ dx) {
  const std::int64_t in_plane = g.height * g.width, out_plane = g.out_height * g.out_width;
  const float scale = 1.f / static_cast<float>(g.size * g.size);
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t plane = e / in_plane, index = e % in_plane;
    const std::int64_t h = index / g.width, w = index % g.width;
    // Windows oh with oh·S - P <= h < oh·S - P + K, clipped to the output.
    const std::int64_t lo_h = h + g.padding - g.size + 1, lo_w = w + g.padding - g.size + 1;
    const std::int64_t oh0 = lo_h <= 0 ? 0 : (lo_h + g.stride - 1) / g.stride;
    const std::int64_t ow0 = lo_w <= 0 ? 0 : (lo_w + g.stride - 1) / g.stride;
    const std::int64_t oh1 = min((h + g.padding) / g.stride, g.out_height - 1);
    const std::int64_t ow1 = min((w + g.padding) / g.stride, g.out_width - 1);
    const float* d = dy + plane * out_plane;
    const std::int32_t* idx = max ? argmax + plane * out_plane : nullptr;
    float acc = 0.f;
    for (std::int64_t oh = oh0; oh <= oh1; ++oh)
      for (std::int64_t ow = ow0; ow <= ow1; ++ow) {
        const std::int64_t o = oh * g.out_width + ow;
        if (max) {
          if (idx[o] == index) acc += d[o];
        } else {
          acc += d[o] * scale;
        }
      }
    dx[e] = acc;
  }
}

void check(const PoolShape& s, PoolMode mode, const std::int32_t* argmax) {
  const char* who = mode == PoolMode::max ? "maxpool (GPU)" : "avgpool (GPU)";
  if (s.size < 1 || s.stride < 1 || s.padding < 0 || s.padding >= s.size || s.out_height() < 1 ||
      s.out_width() < 1)
    fail(std::string(who) + ": size " + std::to_string(s.size) + ", stride " + std::to_string(s.stride) +
         ", padding " + std::to_string(s.padding) + " do not fit a " + std::to_string(s.height) + "x" +
         std::to_string(s.width) + " input");
  if (mode == PoolMode::max && argmax == nullptr) fail(std::string(who) + ": needs an argmax buffer");
}

}  // namespace

void pool2d_forward(GpuContext& ctx, PoolMode mode, const PoolShape& shape, const float* x, float* y,
                    std::int32_t* argmax) {
  check(shape, mode, argmax);
  const std::int64_t total = shape.batch * shape.channels * shape.out_height() * shape.out_width();
  if (total == 0) return;
  pool_forward<<<blocks_for(total), kBlock, 0, stream(ctx)>>>(mode == PoolMode::max, geometry_of(shape), total, x,
                                                              y, argmax);
  DLSCALE_CHECK_LAUNCH();
}

void pool2d_backward(GpuContext& ctx, PoolMode mode, const PoolShape& shape, const float* dy,
                     const std::int32_t* argmax, float* dx) {
  check(shape, mode, argmax);
  const std::int64_t total = shape.batch * shape.channels * shape.height * shape.width;
  if (total == 0) return;
  pool_backward<<<blocks_for(total), kBlock, 0, stream(ctx)>>>(mode == PoolMode::max, geometry_of(shape), total,
                                                               dy, argmax, dx);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
