// CUDA layer normalization (layers/layernorm.cpp). A thread per row does
// what the CPU does for that row (statistics in double, the same order), so
// y and dx match the CPU's to float rounding; scale and offset gradients
// have a thread per column adding the rows in row order.
#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

__global__ void layernorm_forward_kernel(const float* __restrict__ x, const float* __restrict__ g,
                                         const float* __restrict__ b, float* __restrict__ y, float* __restrict__ xh,
                                         double* __restrict__ rstd, std::int64_t rows, std::int64_t c,
                                         double epsilon) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    const float* xr = x + r * c;
    double mean = 0, var = 0;
    for (std::int64_t j = 0; j < c; ++j) mean += xr[j];
    mean /= static_cast<double>(c);
    for (std::int64_t j = 0; j < c; ++j) var += (xr[j] - mean) * (xr[j] - mean);
    const double s = 1.0 / sqrt(var / static_cast<double>(c) + epsilon);
    rstd[r] = s;
    for (std::int64_t j = 0; j < c; ++j) {
      const float h = static_cast<float>((xr[j] - mean) * s);
      xh[r * c + j] = h;
      y[r * c + j] = h * g[j] + b[j];
    }
  }
}

__global__ void layernorm_input_grad_kernel(const float* __restrict__ dy, const float* __restrict__ xh,
                                            const double* __restrict__ rstd, const float* __restrict__ g,
                                            float* __restrict__ dx, std::int64_t rows, std::int64_t c) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    double mean_d = 0, mean_dx = 0;
    for (std::int64_t j = 0; j < c; ++j) {
      const double d = static_cast<double>(dy[r * c + j]) * g[j];
      mean_d += d;
      mean_dx += d * xh[r * c + j];
    }
    mean_d /= static_cast<double>(c);
    mean_dx /= static_cast<double>(c);
    for (std::int64_t j = 0; j < c; ++j)
      dx[r * c + j] =
          static_cast<float>(rstd[r] * (static_cast<double>(dy[r * c + j]) * g[j] - mean_d - xh[r * c + j] * mean_dx));
  }
}

__global__ void layernorm_param_grad_kernel(const float* __restrict__ dy, const float* __restrict__ xh,
                                            float* __restrict__ dg, float* __restrict__ db, std::int64_t rows,
                                            std::int64_t c) {
  for (std::int64_t j = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; j < c;
       j += std::int64_t(gridDim.x) * blockDim.x) {
    float sg = 0.f, sb = 0.f;
    for (std::int64_t r = 0; r < rows; ++r) sg += dy[r * c + j] * xh[r * c + j], sb += dy[r * c + j];
    dg[j] = sg, db[j] = sb;
  }
}

}  // namespace

void layernorm_forward(GpuContext& ctx, const float* x, const float* scale, const float* offset, float* y,
                       float* xhat, double* rstd, std::int64_t rows, std::int64_t width, double epsilon) {
  if (rows == 0) return;
  layernorm_forward_kernel<<<blocks_for(rows), kBlock, 0, stream(ctx)>>>(x, scale, offset, y, xhat, rstd, rows, width,
                                                                         epsilon);
  DLSCALE_CHECK_LAUNCH();
}

void layernorm_backward(GpuContext& ctx, const float* dy, const float* xhat, const double* rstd, const float* scale,
                        float* dx, float* dscale, float* doffset, std::int64_t rows, std::int64_t width) {
  if (rows > 0) {
    layernorm_input_grad_kernel<<<blocks_for(rows), kBlock, 0, stream(ctx)>>>(dy, xhat, rstd, scale, dx, rows, width);
    DLSCALE_CHECK_LAUNCH();
  }
  layernorm_param_grad_kernel<<<blocks_for(width), kBlock, 0, stream(ctx)>>>(dy, xhat, dscale, doffset, rows, width);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
