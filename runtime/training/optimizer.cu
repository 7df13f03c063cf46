// CUDA solver steps (runtime/training/cuda_optimizer.h). Every float operation is an
// explicit round-to-nearest intrinsic (__fmul_rn, __fadd_rn, ...) because
// nvcc would otherwise contract a*b + c into one FMA, which rounds once
// where the CPU loop rounds twice; sqrt and division are IEEE-exact on both.
// Hyperparameters are converted to float exactly as optimizer.cpp does
// (1 - b in double first), so the two backends apply the same numbers.
#include <cmath>
#include <vector>

#include "runtime/training/cuda_optimizer.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

#define DLSCALE_GRID_STRIDE(i, n)                                                       \
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < (n); \
       i += std::int64_t(gridDim.x) * blockDim.x)

__global__ void weight_decay_kernel(float* __restrict__ g, const float* __restrict__ w, float k, std::int64_t n) {
  DLSCALE_GRID_STRIDE(i, n) g[i] = __fadd_rn(g[i], __fmul_rn(k, w[i]));
}

__global__ void scale_kernel(float* __restrict__ g, float f, std::int64_t n) {
  DLSCALE_GRID_STRIDE(i, n) g[i] = __fmul_rn(g[i], f);
}

// Per-block partial sums of g² in double; the second pass adds them in block order.
__global__ void square_partials(const float* __restrict__ g, std::int64_t n, double* __restrict__ partial) {
  __shared__ double s[kBlock];
  double acc = 0;
  DLSCALE_GRID_STRIDE(i, n) acc += static_cast<double>(g[i]) * static_cast<double>(g[i]);
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
}

__global__ void add_partials(double* __restrict__ partial, unsigned count) {
  if (threadIdx.x != 0 || blockIdx.x != 0) return;
  double total = 0;
  for (unsigned b = 0; b < count; ++b) total += partial[b];
  partial[0] = total;
}

__global__ void sgdm_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ v, float mu,
                            float lr, std::int64_t n) {
  DLSCALE_GRID_STRIDE(i, n) {
    const float vi = __fsub_rn(__fmul_rn(mu, v[i]), __fmul_rn(lr, g[i]));
    v[i] = vi;
    w[i] = __fadd_rn(w[i], vi);
  }
}

__global__ void adam_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ m,
                            float* __restrict__ v, float b1, float b2, float cb1, float cb2, float a, float c,
                            float eps, std::int64_t n) {
  DLSCALE_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float mi = __fadd_rn(__fmul_rn(b1, m[i]), __fmul_rn(cb1, gi));
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(cb2, gi), gi));
    m[i] = mi;
    v[i] = vi;
    w[i] = __fsub_rn(w[i], __fdiv_rn(__fmul_rn(a, mi), __fadd_rn(__fsqrt_rn(__fmul_rn(vi, c)), eps)));
  }
}

__global__ void rmsprop_kernel(float* __restrict__ w, const float* __restrict__ g, float* __restrict__ v, float b2,
                               float cb2, float eps, float lr, std::int64_t n) {
  DLSCALE_GRID_STRIDE(i, n) {
    const float gi = g[i];
    const float vi = __fadd_rn(__fmul_rn(b2, v[i]), __fmul_rn(__fmul_rn(cb2, gi), gi));
    v[i] = vi;
    w[i] = __fsub_rn(w[i], __fdiv_rn(__fmul_rn(lr, gi), __fadd_rn(__fsqrt_rn(vi), eps)));
  }
}

}  // namespace

void add_weight_decay(GpuContext& ctx, float* grad, const float* value, std::int64_t count, double l2) {
  if (count == 0) return;
  weight_decay_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(grad, value, static_cast<float>(l2), count);
  DLSCALE_CHECK_LAUNCH();
}

double squared_norm(GpuContext& ctx, const float* grad, std::int64_t count) {
  if (count == 0) return 0.0;
  const unsigned blocks = blocks_for(count);
  DeviceBuffer partial = ctx.alloc(sizeof(double) * blocks);
  square_partials<<<blocks, kBlock, 0, stream(ctx)>>>(grad, count, partial.as<double>());
  DLSCALE_CHECK_LAUNCH();
  add_partials<<<1, 1, 0, stream(ctx)>>>(partial.as<double>(), blocks);
  DLSCALE_CHECK_LAUNCH();
  double total = 0;
  ctx.download(&total, partial.get(), sizeof total);
  return total;
}

void scale(GpuContext& ctx, float* grad, std::int64_t count, double factor) {
  if (count == 0) return;
  scale_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(grad, static_cast<float>(factor), count);
  DLSCALE_CHECK_LAUNCH();
}

double clip_gradients(GpuContext& ctx, const std::vector<DeviceParam>& params, double threshold,
                      const std::string& method) {
  if (method != "l2norm" && method != "global-l2norm")
    fail("unknown gradient-threshold-method '" + method + "' (expected l2norm or global-l2norm)");
  if (!(threshold > 0.0)) fail("gradient-threshold must be > 0, got " + std::to_string(threshold));
  if (method == "l2norm") {
    double largest = 0.0;
    for (const DeviceParam& p : params) {
      const double norm = std::sqrt(squared_norm(ctx, p.grad, p.count));
      largest = std::max(largest, norm);
      if (norm > threshold) scale(ctx, p.grad, p.count, threshold / norm);
    }
    return largest;
  }
  double total = 0.0;
  for (const DeviceParam& p : params) total += squared_norm(ctx, p.grad, p.count);
  const double norm = std::sqrt(total);
  if (norm > threshold)
    for (const DeviceParam& p : params) scale(ctx, p.grad, p.count, threshold / norm);
  return norm;
}

void sgdm_update(GpuContext& ctx, float* value, const float* grad, float* velocity, std::int64_t count,
                 double momentum, double learn_rate) {
  if (count == 0) return;
  sgdm_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(value, grad, velocity, static_cast<float>(momentum),
                                                             static_cast<float>(learn_rate), count);
  DLSCALE_CHECK_LAUNCH();
}

void adam_update(GpuContext& ctx, float* value, const float* grad, float* mean, float* sq_mean, std::int64_t count,
                 double b1, double b2, double epsilon, double learn_rate, double step) {
  if (count == 0) return;
  // The bias corrections folded into two scalars in double, as optimizer.cpp.
  const double step_size = learn_rate / (1.0 - std::pow(b1, step));
  const double inv_bias2 = 1.0 / (1.0 - std::pow(b2, step));
  adam_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(
      value, grad, mean, sq_mean, static_cast<float>(b1), static_cast<float>(b2), static_cast<float>(1.0 - b1),
      static_cast<float>(1.0 - b2), static_cast<float>(step_size), static_cast<float>(inv_bias2),
      static_cast<float>(epsilon), count);
  DLSCALE_CHECK_LAUNCH();
}

void rmsprop_update(GpuContext& ctx, float* value, const float* grad, float* sq_mean, std::int64_t count,
                    double decay, double epsilon, double learn_rate) {
  if (count == 0) return;
  rmsprop_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(value, grad, sq_mean, static_cast<float>(decay),
                                                                static_cast<float>(1.0 - decay),
                                                                static_cast<float>(epsilon),
                                                                static_cast<float>(learn_rate), count);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
