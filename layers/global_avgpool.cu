// CUDA global average pooling (layers/global_avgpool.cpp). Forward gives
// each (sample, channel) plane to one thread, which adds the plane in the
// CPU's order and scales by the same float 1/(H·W): the result is the CPU's,
// bit for bit, and no atomics are needed. ResNet heads pool planes of a few
// dozen elements over a few thousand planes per batch, so a thread per plane
// keeps the GPU busy enough for a layer this small. Backward is one thread
// per input element.
#include <string>

#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

__global__ void global_avgpool_forward_kernel(std::int64_t planes, std::int64_t area, const float* __restrict__ x,
                                              float* __restrict__ y) {
  const float scale = 1.f / static_cast<float>(area);
  for (std::int64_t p = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; p < planes;
       p += std::int64_t(gridDim.x) * blockDim.x) {
    const float* in = x + p * area;
    float s = 0.f;
    for (std::int64_t i = 0; i < area; ++i) s += in[i];
    y[p] = s * scale;
  }
}

__global__ void global_avgpool_backward_kernel(std::int64_t planes, std::int64_t area, const float* __restrict__ dy,
                                               float* __restrict__ dx) {
  const float scale = 1.f / static_cast<float>(area);
  const std::int64_t total = planes * area;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x)
    dx[e] = dy[e / area] * scale;
}

void check(std::int64_t planes, std::int64_t area) {
  if (planes < 0 || area < 1)
    fail("globalavgpool (GPU): " + std::to_string(planes) + " planes of " + std::to_string(area) +
         " elements is not a pooling shape");
}

}  // namespace

void global_avgpool_forward(GpuContext& ctx, std::int64_t planes, std::int64_t area, const float* x, float* y) {
  check(planes, area);
  if (planes == 0) return;
  global_avgpool_forward_kernel<<<blocks_for(planes), kBlock, 0, stream(ctx)>>>(planes, area, x, y);
  DLSCALE_CHECK_LAUNCH();
}

void global_avgpool_backward(GpuContext& ctx, std::int64_t planes, std::int64_t area, const float* dy, float* dx) {
  check(planes, area);
  if (planes == 0) return;
  global_avgpool_backward_kernel<<<blocks_for(planes * area), kBlock, 0, stream(ctx)>>>(planes, area, dy, dx);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
