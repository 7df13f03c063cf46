// CUDA positional embedding (layers/positional_embedding.cpp): a broadcast
// add; dP has a thread per element of P adding the samples in order (the
// CPU's order, so the result is bitwise the CPU's).
#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

__global__ void posembedding_forward_kernel(const float* __restrict__ x, const float* __restrict__ p,
                                            float* __restrict__ y, std::int64_t total, std::int64_t plane) {
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x)
    y[e] = x[e] + p[e % plane];
}

__global__ void posembedding_backward_kernel(const float* __restrict__ dy, float* __restrict__ dp,
                                             std::int64_t batch, std::int64_t plane) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < plane;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    float s = 0.f;
    for (std::int64_t n = 0; n < batch; ++n) s += dy[n * plane + i];
    dp[i] = s;
  }
}

}  // namespace

void posembedding_forward(GpuContext& ctx, const float* x, const float* p, float* y, std::int64_t batch,
                          std::int64_t plane) {
  if (batch * plane == 0) return;
  posembedding_forward_kernel<<<blocks_for(batch * plane), kBlock, 0, stream(ctx)>>>(x, p, y, batch * plane, plane);
  DLSCALE_CHECK_LAUNCH();
}

void posembedding_backward(GpuContext& ctx, const float* dy, float* dp, std::int64_t batch, std::int64_t plane) {
  posembedding_backward_kernel<<<blocks_for(plane), kBlock, 0, stream(ctx)>>>(dy, dp, batch, plane);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
