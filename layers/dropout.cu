// CUDA inverted dropout (layers/dropout.cpp). The mask comes from a
// counter-based generator: element i's uniform is a hash of (seed, offset +
// i), so any thread can draw any element, backward regenerates the mask
// instead of storing it, and a (seed, offset) pair fixes the mask on every
// GPU and grid size. The hash is SplitMix64's finalizer (Steele, Lea, Flood
// 2014), whose outputs for consecutive counters pass BigCrush.
#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

__host__ __device__ inline std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1) with 53 random bits, as Rng::uniform.
__device__ inline double uniform(std::uint64_t key, std::uint64_t counter) {
  return static_cast<double>(mix64(key + counter * 0x9E3779B97F4A7C15ull) >> 11) * 0x1.0p-53;
}

// out = in * mask; in is x (forward) or dy (backward), the same mask for both.
__global__ void apply_mask(double rate, float keep_scale, std::uint64_t key, std::uint64_t offset,
                           const float* __restrict__ in, float* __restrict__ out, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    out[i] = uniform(key, offset + static_cast<std::uint64_t>(i)) < rate ? 0.f : in[i] * keep_scale;
}

void run(GpuContext& ctx, double rate, std::uint64_t seed, std::uint64_t offset, const float* in, float* out,
         std::int64_t count) {
  DLSCALE_REQUIRE(rate >= 0 && rate < 1, "dropout (GPU): rate must be in [0, 1), got " + std::to_string(rate));
  if (count == 0) return;
  // Hashing the seed first keeps streams of nearby seeds (1, 2, ...) apart.
  const std::uint64_t key = mix64(seed);
  const float keep_scale = static_cast<float>(1.0 / (1.0 - rate));
  apply_mask<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(rate, keep_scale, key, offset, in, out, count);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace

void dropout_forward(GpuContext& ctx, double rate, std::uint64_t seed, std::uint64_t offset, const float* x,
                     float* y, std::int64_t count) {
  run(ctx, rate, seed, offset, x, y, count);
}

void dropout_backward(GpuContext& ctx, double rate, std::uint64_t seed, std::uint64_t offset, const float* dy,
                      float* dx, std::int64_t count) {
  run(ctx, rate, seed, offset, dy, dx, count);
}

}  // namespace dlscale::gpu
