// CUDA batch normalization (layers/batchnorm.cpp). Training forward,
// inference forward and training backward are cuDNN's spatial batch norm
// (per channel over N, H, W; an N×F input is N×F×1×1), whose running
// variance is the unbiased one, as the CPU layer's. cuDNN has no backward
// for an inference-mode forward (statistics as constants), so that one is a
// small kernel pair: per-channel sums in double, then dx = scale·inv_std·dy.
#include <cmath>
#include <string>

#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

int as_int(std::int64_t v, const char* what) {
  DLSCALE_REQUIRE(v >= 1 && v <= 0x7fffffff, std::string("batchnorm (GPU): ") + what + " = " + std::to_string(v) +
                                                 " must be between 1 and 2^31-1 for cuDNN");
  return static_cast<int>(v);
}

// x viewed as (N, C, S, 1) and the per-channel (1, C, 1, 1) tensors.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, channel = nullptr;
  explicit Descriptors(const BatchNormShape& s) {
    DLSCALE_CHECK_CUDNN(cudnnCreateTensorDescriptor(&x));
    DLSCALE_CHECK_CUDNN(cudnnCreateTensorDescriptor(&channel));
    DLSCALE_CHECK_CUDNN(cudnnSetTensor4dDescriptor(x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(s.batch, "batch"),
                                                   as_int(s.channels, "channels"), as_int(s.spatial, "H*W"), 1));
    DLSCALE_CHECK_CUDNN(cudnnDeriveBNTensorDescriptor(channel, x, CUDNN_BATCHNORM_SPATIAL));
  }
  ~Descriptors() {
    if (channel) cudnnDestroyTensorDescriptor(channel);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

void check_epsilon(double epsilon) {
  if (!(epsilon > 0 && epsilon >= CUDNN_BN_MIN_EPSILON))
    fail("batchnorm (GPU): epsilon " + std::to_string(epsilon) + " must be positive and at least cuDNN's minimum " +
         std::to_string(CUDNN_BN_MIN_EPSILON));
}

// Block c: sums of dy and dy·xhat over channel c, xhat from the running statistics.
__global__ void inference_sums(const float* __restrict__ x, const float* __restrict__ dy,
                               const float* __restrict__ mean, const float* __restrict__ var, double epsilon,
                               std::int64_t n, std::int64_t channels, std::int64_t spatial, float* __restrict__ dscale,
                               float* __restrict__ doffset) {
  __shared__ double s_dy[kBlock], s_dyx[kBlock];
  const std::int64_t c = blockIdx.x;
  const double m = mean[c], inv = 1.0 / sqrt(static_cast<double>(var[c]) + epsilon);
  double a = 0, b = 0;
  for (std::int64_t j = threadIdx.x; j < n * spatial; j += kBlock) {
    const std::int64_t i = ((j / spatial) * channels + c) * spatial + j % spatial;
    const float xhat = static_cast<float>((x[i] - m) * inv);  // stored as float on the CPU too
    a += dy[i];
    b += static_cast<double>(dy[i]) * xhat;
  }
  s_dy[threadIdx.x] = a;
  s_dyx[threadIdx.x] = b;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      s_dy[threadIdx.x] += s_dy[threadIdx.x + half];
      s_dyx[threadIdx.x] += s_dyx[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    doffset[c] = static_cast<float>(s_dy[0]);
    dscale[c] = static_cast<float>(s_dyx[0]);
  }
}

__global__ void inference_dx(const float* __restrict__ dy, const float* __restrict__ scale,
                             const float* __restrict__ var, double epsilon, std::int64_t total, std::int64_t channels,
                             std::int64_t spatial, float* __restrict__ dx) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t c = (i / spatial) % channels;
    const double inv = 1.0 / sqrt(static_cast<double>(var[c]) + epsilon);
    const double k = scale[c] * inv;
    dx[i] = static_cast<float>(k * dy[i]);
  }
}

}  // namespace

void batchnorm_forward_training(GpuContext& ctx, const BatchNormShape& s, double momentum, double epsilon,
                                const float* x, const float* scale, const float* offset, float* y,
                                float* running_mean, float* running_var, float* save_mean, float* save_inv_std) {
  check_epsilon(epsilon);
  if (s.batch * s.spatial < 2)
    fail("batchnorm (GPU): training needs more than one value per channel, got a batch of " +
         std::to_string(s.batch) + " with " + std::to_string(s.spatial) + " value(s) per channel each");
  Descriptors d(s);
  const float one = 1.f, zero = 0.f;
  DLSCALE_CHECK_CUDNN(cudnnBatchNormalizationForwardTraining(ctx.impl().cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                             d.x, x, d.x, y, d.channel, scale, offset, momentum,
                                                             running_mean, running_var, epsilon, save_mean,
                                                             save_inv_std));
}

void batchnorm_forward_inference(GpuContext& ctx, const BatchNormShape& s, double epsilon, const float* x,
                                 const float* scale, const float* offset, const float* running_mean,
                                 const float* running_var, float* y) {
  check_epsilon(epsilon);
  if (s.batch == 0) return;
  Descriptors d(s);
  const float one = 1.f, zero = 0.f;
  DLSCALE_CHECK_CUDNN(cudnnBatchNormalizationForwardInference(ctx.impl().cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero,
                                                              d.x, x, d.x, y, d.channel, scale, offset, running_mean,
                                                              running_var, epsilon));
}

void batchnorm_backward_training(GpuContext& ctx, const BatchNormShape& s, double epsilon, const float* x,
                                 const float* dy, const float* scale, const float* save_mean,
                                 const float* save_inv_std, float* dx, float* dscale, float* doffset) {
  check_epsilon(epsilon);
  Descriptors d(s);
  const float one = 1.f, zero = 0.f;
  DLSCALE_CHECK_CUDNN(cudnnBatchNormalizationBackward(ctx.impl().cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one,
                                                      &zero, d.x, x, d.x, dy, d.x, dx, d.channel, scale, dscale,
                                                      doffset, epsilon, save_mean, save_inv_std));
}

void batchnorm_backward_inference(GpuContext& ctx, const BatchNormShape& s, double epsilon, const float* x,
                                  const float* dy, const float* scale, const float* running_mean,
                                  const float* running_var, float* dx, float* dscale, float* doffset) {
  check_epsilon(epsilon);
  if (s.channels < 1) return;
  inference_sums<<<static_cast<unsigned>(s.channels), kBlock, 0, stream(ctx)>>>(
      x, dy, running_mean, running_var, epsilon, s.batch, s.channels, s.spatial, dscale, doffset);
  DLSCALE_CHECK_LAUNCH();
  const std::int64_t total = s.batch * s.channels * s.spatial;
  if (total == 0) return;
  inference_dx<<<blocks_for(total), kBlock, 0, stream(ctx)>>>(dy, scale, running_var, epsilon, total, s.channels,
                                                              s.spatial, dx);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
