// CUDA dense layer: the GEMMs of layers/dense.cpp through cuBLAS.
// cuBLAS is column-major; a row-major (r, c) matrix is the column-major
// (c, r) matrix, its transpose. So every row-major product C = A·B below is
// issued as the column-major product Cᵀ = Bᵀ·Aᵀ, which needs no copies:
//   y  (N, U) = x (N, F) · Wᵀ  ->  yᵀ (U, N) = W_cmᵀ (U, F) · x_cm (F, N)
//   dW (U, F) = dyᵀ · x         ->  dWᵀ (F, U) = x_cm (F, N) · dy_cmᵀ (N, U)
//   dx (N, F) = dy · W          ->  dxᵀ (F, N) = W_cm (F, U) · dy_cm (U, N)
// where M_cm is the row-major array M read column-major (= Mᵀ).
// Under f16/bf16 math each product is cublasGemmEx on 2-byte copies of its
// two operands, accumulating (CUBLAS_COMPUTE_32F, tensor cores) into the
// float32 result: the weight gradient comes out float32 directly.
#include "layers/cuda_layers.h"
#include "layers/mixed_precision.cuh"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

// y[i][u] = b[u]: the GEMM then adds x·Wᵀ onto it (beta = 1), as on the CPU.
__global__ void broadcast_rows(const float* __restrict__ b, float* __restrict__ y, std::int64_t rows,
                               std::int64_t cols) {
  const std::int64_t total = rows * cols;
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < total;
       i += std::int64_t(gridDim.x) * blockDim.x)
    y[i] = b[i % cols];
}

// db[u] = sum over rows of dy[i][u]. A 32-column tile per block, 8 row
// lanes each summing a strided share of the rows, then the 8 partials added
// in lane order: no atomics, so the result is the same on every run.
constexpr int kTile = 32, kLanes = 8;
__global__ void column_sums(const float* __restrict__ dy, float* __restrict__ db, std::int64_t rows,
                            std::int64_t cols) {
  __shared__ float partial[kLanes][kTile];
  const std::int64_t col = blockIdx.x * std::int64_t(kTile) + threadIdx.x;
  float s = 0;
  if (col < cols)
    for (std::int64_t r = threadIdx.y; r < rows; r += kLanes) s += dy[r * cols + col];
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    float total = 0;
    for (int l = 0; l < kLanes; ++l) total += partial[l][threadIdx.x];
    db[col] = total;
  }
}

int as_int(std::int64_t v, const char* what) {
  DLSCALE_REQUIRE(v >= 0 && v <= 0x7fffffff, std::string("dense (GPU): ") + what + " = " + std::to_string(v) +
                                                 " exceeds cuBLAS's 32-bit dimensions");
  return static_cast<int>(v);
}

// C (m, n, column-major, float32) = alpha·op(A)·op(B) + beta·C: cublasSgemm
// in float32 math, else cublasGemmEx on the 2-byte operands with float32
// accumulation and output.
void gemm(GpuContext& ctx, MathPrecision math, cublasOperation_t op_a, cublasOperation_t op_b, int m, int n, int k,
          float alpha, const MathOperand& a, int lda, const MathOperand& b, int ldb, float beta, float* c, int ldc) {
  cublasHandle_t h = ctx.impl().cublas;
  if (math == MathPrecision::f32) {
    DLSCALE_CHECK_CUBLAS(cublasSgemm(h, op_a, op_b, m, n, k, &alpha, static_cast<const float*>(a.get()), lda,
                                     static_cast<const float*>(b.get()), ldb, &beta, c, ldc));
    return;
  }
  const cudaDataType_t type = cublas_type(math);
  DLSCALE_CHECK_CUBLAS(cublasGemmEx(h, op_a, op_b, m, n, k, &alpha, a.get(), type, lda, b.get(), type, ldb, &beta, c,
                                    CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace

void dense_forward(GpuContext& ctx, const float* x, const float* weight, const float* bias, float* y,
                   std::int64_t batch, std::int64_t features, std::int64_t units, MathPrecision math) {
  if (batch == 0) return;
  const int n = as_int(batch, "batch"), f = as_int(features, "features"), u = as_int(units, "units");
  float beta = 0.f;
  if (bias != nullptr) {
    broadcast_rows<<<blocks_for(batch * units), kBlock, 0, stream(ctx)>>>(bias, y, batch, units);
    DLSCALE_CHECK_LAUNCH();
    beta = 1.f;
  }
  const MathOperand w_in(ctx, math, weight, units * features), x_in(ctx, math, x, batch * features);
  gemm(ctx, math, CUBLAS_OP_T, CUBLAS_OP_N, u, n, f, 1.f, w_in, f, x_in, f, beta, y, u);
}

void dense_backward(GpuContext& ctx, const float* x, const float* weight, const float* dy, float* dx,
                    float* dweight, float* dbias, std::int64_t batch, std::int64_t features, std::int64_t units,
                    MathPrecision math) {
  const int n = as_int(batch, "batch"), f = as_int(features, "features"), u = as_int(units, "units");
  // With an empty batch the GEMM (k = 0) still writes beta·C = 0, as the CPU does.
  const MathOperand dy_in(ctx, math, dy, batch * units);
  {
    const MathOperand x_in(ctx, math, x, batch * features);
    gemm(ctx, math, CUBLAS_OP_N, CUBLAS_OP_T, f, u, n, 1.f, x_in, f, dy_in, u, 0.f, dweight, f);
  }
  if (dx != nullptr && batch > 0) {
    const MathOperand w_in(ctx, math, weight, units * features);
    gemm(ctx, math, CUBLAS_OP_N, CUBLAS_OP_N, f, n, u, 1.f, w_in, f, dy_in, u, 0.f, dx, f);
  }
  if (dbias != nullptr) {
    const dim3 block(kTile, kLanes);
    const unsigned grid = static_cast<unsigned>((units + kTile - 1) / kTile);
    column_sums<<<grid, block, 0, stream(ctx)>>>(dy, dbias, batch, units);
    DLSCALE_CHECK_LAUNCH();
  }
}

}  // namespace dlscale::gpu
