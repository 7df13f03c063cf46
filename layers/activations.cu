// CUDA elementwise activations: the functors of layers/activations.cpp in
// float, one grid-stride kernel per pass. (cuDNN's activation routines have
// no GELU and would only add descriptors for a memory-bound loop.)
#include <cmath>

#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

struct Relu {
  __device__ float f(float x) const { return x > 0.f ? x : 0.f; }
  __device__ float df(float x, float) const { return x > 0.f ? 1.f : 0.f; }  // 0 at the kink, as PyTorch
};

struct LeakyRelu {
  float alpha;
  __device__ float f(float x) const { return x > 0.f ? x : alpha * x; }
  __device__ float df(float x, float) const { return x > 0.f ? 1.f : alpha; }
};

// gelu(x) = x Φ(x); gelu'(x) = Φ(x) + x φ(x).
struct Gelu {
  __device__ float f(float x) const { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
  __device__ float df(float x, float) const {
    const float cdf = 0.5f * (1.f + erff(x * 0.70710678118654752f));
    const float pdf = expf(-0.5f * x * x) * 0.39894228040143268f;  // 1/sqrt(2π)
    return cdf + x * pdf;
  }
};

struct Tanh {
  __device__ float f(float x) const { return tanhf(x); }
  __device__ float df(float, float y) const { return 1.f - y * y; }
};

struct Sigmoid {
  // Branching keeps expf from overflowing for large |x|.
  __device__ float f(float x) const {
    if (x >= 0.f) return 1.f / (1.f + expf(-x));
    const float e = expf(x);
    return e / (1.f + e);
  }
  __device__ float df(float, float y) const { return y * (1.f - y); }
};

template <class Op>
__global__ void forward_kernel(Op op, const float* __restrict__ x, float* __restrict__ y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    y[i] = op.f(x[i]);
}

template <class Op>
__global__ void backward_kernel(Op op, const float* __restrict__ x, const float* __restrict__ y,
                                const float* __restrict__ dy, float* __restrict__ dx, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    dx[i] = dy[i] * op.df(x[i], y[i]);
}

// Calls fn(op) with the functor of `kind`.
template <class Fn>
void with_op(Activation kind, double alpha, Fn&& fn) {
  switch (kind) {
    case Activation::relu: return fn(Relu{});
    case Activation::leakyrelu: return fn(LeakyRelu{static_cast<float>(alpha)});
    case Activation::gelu: return fn(Gelu{});
    case Activation::tanh: return fn(Tanh{});
    case Activation::sigmoid: return fn(Sigmoid{});
  }
}

}  // namespace

Activation activation_from_kind(const std::string& kind) {
  if (kind == "relu") return Activation::relu;
  if (kind == "leakyrelu") return Activation::leakyrelu;
  if (kind == "gelu") return Activation::gelu;
  if (kind == "tanh") return Activation::tanh;
  if (kind == "sigmoid") return Activation::sigmoid;
  fail("the GPU backend has no activation '" + kind + "' (relu, leakyrelu, gelu, tanh, sigmoid)");
}

void activation_forward(GpuContext& ctx, Activation kind, double alpha, const float* x, float* y,
                        std::int64_t count) {
  if (count == 0) return;
  with_op(kind, alpha, [&](auto op) {
    forward_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(op, x, y, count);
  });
  DLSCALE_CHECK_LAUNCH();
}

void activation_backward(GpuContext& ctx, Activation kind, double alpha, const float* x, const float* y,
                         const float* dy, float* dx, std::int64_t count) {
  if (count == 0) return;
  with_op(kind, alpha, [&](auto op) {
    backward_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(op, x, y, dy, dx, count);
  });
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
