// float32 <-> fp16/bf16 copies for automatic-mixed precision. Rounding is to
// nearest; a float32 beyond fp16's range (65504) becomes ±Inf, so a loss
// scale that is too large shows up as non-finite gradients, which the loss
// scaler skips (runtime/training/loss_scaler.h).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "layers/mixed_precision.cuh"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

__device__ inline void round_to(float v, __half& out) { out = __float2half_rn(v); }
__device__ inline void round_to(float v, __nv_bfloat16& out) { out = __float2bfloat16_rn(v); }
__device__ inline float widen(__half v) { return __half2float(v); }
__device__ inline float widen(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class Half>
__global__ void narrow_kernel(const float* __restrict__ x, Half* __restrict__ h, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    round_to(x[i], h[i]);
}

template <class Half>
__global__ void widen_kernel(const Half* __restrict__ h, float* __restrict__ y, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    y[i] = widen(h[i]);
}

void require_half(MathPrecision math, const char* what) {
  DLSCALE_REQUIRE(math != MathPrecision::f32, std::string(what) + ": float32 has no 2-byte copy");
}

}  // namespace

MathPrecision math_precision_from_name(const std::string& name) {
  if (name.empty()) return MathPrecision::f32;
  if (name == "fp16") return MathPrecision::f16;
  if (name == "bf16") return MathPrecision::bf16;
  fail("mixed-precision-type: '" + name + "' (expected fp16 or bf16)");
}

const char* name_of(MathPrecision math) {
  switch (math) {
    case MathPrecision::f16: return "fp16";
    case MathPrecision::bf16: return "bf16";
    case MathPrecision::f32: break;
  }
  return "fp32";
}

DeviceBuffer to_half(GpuContext& ctx, MathPrecision math, const float* x, std::int64_t count) {
  require_half(math, "to_half");
  DeviceBuffer h = ctx.alloc(2 * static_cast<std::size_t>(std::max<std::int64_t>(count, 1)));
  if (count == 0) return h;
  if (math == MathPrecision::f16)
    narrow_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(x, h.as<__half>(), count);
  else
    narrow_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(x, h.as<__nv_bfloat16>(), count);
  DLSCALE_CHECK_LAUNCH();
  return h;
}

void from_half(GpuContext& ctx, MathPrecision math, const void* h, float* y, std::int64_t count) {
  require_half(math, "from_half");
  if (count == 0) return;
  if (math == MathPrecision::f16)
    widen_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(static_cast<const __half*>(h), y, count);
  else
    widen_kernel<<<blocks_for(count), kBlock, 0, stream(ctx)>>>(static_cast<const __nv_bfloat16*>(h), y, count);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
