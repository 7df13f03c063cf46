// CUDA multi-head self-attention (layers/attention.cpp). The projections
// are the dense layer's GEMMs over all N·T rows; scores and values are cuBLAS
// strided batched GEMMs over the N·H heads on per-head copies of Q, K, V
// (N, H, T, d); the softmax and its gradient have a thread per score row,
// in float32, with the causal mask as on the CPU.
#include <cmath>

#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

// Row-major C (m×n) = alpha·op(A)·op(B) + beta·C for `batch` matrices at
// fixed strides, as blas.h's gemm does for one: cuBLAS is column-major, so
// it computes Cᵀ = op(B)ᵀ·op(A)ᵀ with the operands swapped.
void batched_gemm(GpuContext& ctx, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                  float alpha, const float* a, std::int64_t stride_a, const float* b, std::int64_t stride_b,
                  float beta, float* c, std::int64_t stride_c, std::int64_t batch) {
  const int lda = static_cast<int>(trans_a ? m : k), ldb = static_cast<int>(trans_b ? k : n);
  DLSCALE_CHECK_CUBLAS(cublasSgemmStridedBatched(
      ctx.impl().cublas, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
      static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, b, ldb, stride_b, a, lda, stride_a,
      &beta, c, static_cast<int>(n), stride_c, static_cast<int>(batch)));
}

// rows (N·T, width) with head h's d columns at column + h·d  <->  heads (N, H, T, d).
__global__ void heads_kernel(const AttentionShape s, float* __restrict__ rows, std::int64_t width,
                             std::int64_t column, float* __restrict__ heads, bool to_heads) {
  const std::int64_t d = s.width / s.heads, total = s.batch * s.heads * s.tokens * d;  // head_size() is host code
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t i = e % d, t = (e / d) % s.tokens, h = (e / (d * s.tokens)) % s.heads,
                       n = e / (d * s.tokens * s.heads);
    float& r = rows[(n * s.tokens + t) * width + column + h * d + i];
    if (to_heads)
      heads[e] = r;
    else
      r = heads[e];
  }
}

void split(GpuContext& ctx, const AttentionShape& s, const float* rows, std::int64_t width, std::int64_t column,
           float* heads) {
  heads_kernel<<<blocks_for(s.rows() * s.width), kBlock, 0, stream(ctx)>>>(s, const_cast<float*>(rows), width,
                                                                            column, heads, true);
  DLSCALE_CHECK_LAUNCH();
}
void merge(GpuContext& ctx, const AttentionShape& s, const float* heads, std::int64_t width, std::int64_t column,
           float* rows) {
  heads_kernel<<<blocks_for(s.rows() * s.width), kBlock, 0, stream(ctx)>>>(s, rows, width, column,
                                                                            const_cast<float*>(heads), false);
  DLSCALE_CHECK_LAUNCH();
}

// In place over the scores, one thread per row i of a T×T block: keys after
// i are masked when causal.
__global__ void softmax_rows_kernel(float* __restrict__ p, std::int64_t rows, std::int64_t t, bool causal) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    float* row = p + r * t;
    const std::int64_t keys = causal ? r % t + 1 : t;
    float top = row[0];
    for (std::int64_t j = 1; j < keys; ++j) top = fmaxf(top, row[j]);
    float sum = 0.f;
    for (std::int64_t j = 0; j < keys; ++j) sum += row[j] = expf(row[j] - top);
    for (std::int64_t j = 0; j < keys; ++j) row[j] /= sum;
    for (std::int64_t j = keys; j < t; ++j) row[j] = 0.f;
  }
}

// dS = P ⊙ (dP - rowsum(dP ⊙ P)) · scale, in place of dP.
__global__ void softmax_grad_kernel(const float* __restrict__ p, float* __restrict__ dp, std::int64_t rows,
                                    std::int64_t t, float scale) {
  for (std::int64_t r = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; r < rows;
       r += std::int64_t(gridDim.x) * blockDim.x) {
    float dot = 0.f;
    for (std::int64_t j = 0; j < t; ++j) dot += dp[r * t + j] * p[r * t + j];
    for (std::int64_t j = 0; j < t; ++j) dp[r * t + j] = p[r * t + j] * (dp[r * t + j] - dot) * scale;
  }
}

float scale_of(const AttentionShape& s) { return static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_size()))); }

}  // namespace

void attention_forward(GpuContext& ctx, const AttentionShape& s, const float* x, const AttentionParams& w, float* y,
                       const AttentionSaved& saved) {
  const std::int64_t rows = s.rows(), c = s.width, t = s.tokens, d = s.head_size(), heads = s.batch * s.heads;
  if (rows == 0) return;
  DeviceBuffer qkv = ctx.alloc(sizeof(float) * rows * 3 * c), out = ctx.alloc(sizeof(float) * rows * c);
  dense_forward(ctx, x, w.qkv_weight, w.qkv_bias, qkv.as<float>(), rows, c, 3 * c);
  split(ctx, s, qkv.as<float>(), 3 * c, 0, saved.q);
  split(ctx, s, qkv.as<float>(), 3 * c, c, saved.k);
  split(ctx, s, qkv.as<float>(), 3 * c, 2 * c, saved.v);
  batched_gemm(ctx, false, true, t, t, d, scale_of(s), saved.q, t * d, saved.k, t * d, 0.f, saved.p, t * t, heads);
  softmax_rows_kernel<<<blocks_for(heads * t), kBlock, 0, stream(ctx)>>>(saved.p, heads * t, t, s.causal);
  DLSCALE_CHECK_LAUNCH();
  batched_gemm(ctx, false, false, t, d, t, 1.f, saved.p, t * t, saved.v, t * d, 0.f, out.as<float>(), t * d, heads);
  merge(ctx, s, out.as<float>(), c, 0, saved.o);
  dense_forward(ctx, saved.o, w.out_weight, w.out_bias, y, rows, c, c);
}

void attention_backward(GpuContext& ctx, const AttentionShape& s, const float* x, const float* dy,
                        const AttentionParams& w, const AttentionSaved& saved, float* dx, float* dqkv_weight,
                        float* dqkv_bias, float* dout_weight, float* dout_bias) {
  const std::int64_t rows = s.rows(), c = s.width, t = s.tokens, d = s.head_size(), heads = s.batch * s.heads;
  const std::int64_t head_elems = rows * c;  // N·H·T·d
  DeviceBuffer d_o = ctx.alloc(sizeof(float) * rows * c), d_heads = ctx.alloc(sizeof(float) * head_elems),
               dq = ctx.alloc(sizeof(float) * head_elems), dk = ctx.alloc(sizeof(float) * head_elems),
               dv = ctx.alloc(sizeof(float) * head_elems), dp = ctx.alloc(sizeof(float) * heads * t * t),
               dqkv = ctx.alloc(sizeof(float) * rows * 3 * c);
  dense_backward(ctx, saved.o, w.out_weight, dy, d_o.as<float>(), dout_weight, dout_bias, rows, c, c);
  split(ctx, s, d_o.as<float>(), c, 0, d_heads.as<float>());
  const float* g = d_heads.as<float>();
  batched_gemm(ctx, false, true, t, t, d, 1.f, g, t * d, saved.v, t * d, 0.f, dp.as<float>(), t * t, heads);
  batched_gemm(ctx, true, false, t, d, t, 1.f, saved.p, t * t, g, t * d, 0.f, dv.as<float>(), t * d, heads);
  softmax_grad_kernel<<<blocks_for(heads * t), kBlock, 0, stream(ctx)>>>(saved.p, dp.as<float>(), heads * t, t,
                                                                         scale_of(s));
  DLSCALE_CHECK_LAUNCH();
  batched_gemm(ctx, false, false, t, d, t, 1.f, dp.as<float>(), t * t, saved.k, t * d, 0.f, dq.as<float>(), t * d,
               heads);
  batched_gemm(ctx, true, false, t, d, t, 1.f, dp.as<float>(), t * t, saved.q, t * d, 0.f, dk.as<float>(), t * d,
               heads);
  merge(ctx, s, dq.as<float>(), 3 * c, 0, dqkv.as<float>());
  merge(ctx, s, dk.as<float>(), 3 * c, c, dqkv.as<float>());
  merge(ctx, s, dv.as<float>(), 3 * c, 2 * c, dqkv.as<float>());
  dense_backward(ctx, x, w.qkv_weight, dqkv.as<float>(), dx, dqkv_weight, dqkv_bias, rows, c, 3 * c);
}

}  // namespace dlscale::gpu
