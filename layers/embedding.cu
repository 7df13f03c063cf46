// CUDA token embedding (layers/embedding.cpp). Forward: a thread per output
// element gathers its weight. Backward: a thread per feature column adds
// the rows in row order, the CPU's order, so dW is bitwise the CPU's and
// needs no atomics (C threads only, but the table is small next to the
// attention that follows).
#include <climits>
#include <string>

#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

__global__ void embedding_forward_kernel(const float* __restrict__ ids, const float* __restrict__ w,
                                         float* __restrict__ y, std::int64_t rows, std::int64_t vocab,
                                         std::int64_t dim, unsigned long long* bad_row) {
  const std::int64_t total = rows * dim;
  for (std::int64_t e = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; e < total;
       e += std::int64_t(gridDim.x) * blockDim.x) {
    const std::int64_t r = e / dim, c = e % dim;
    const float id = nearbyintf(ids[r]);
    if (!(id >= 0.f && id < static_cast<float>(vocab))) {
      atomicMin(bad_row, static_cast<unsigned long long>(r));
      y[e] = 0.f;
      continue;
    }
    y[e] = w[static_cast<std::int64_t>(id) * dim + c];
  }
}

__global__ void embedding_backward_kernel(const float* __restrict__ ids, const float* __restrict__ dy,
                                          float* __restrict__ dw, std::int64_t rows, std::int64_t vocab,
                                          std::int64_t dim) {
  for (std::int64_t c = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; c < dim;
       c += std::int64_t(gridDim.x) * blockDim.x) {
    for (std::int64_t v = 0; v < vocab; ++v) dw[v * dim + c] = 0.f;
    for (std::int64_t r = 0; r < rows; ++r) dw[static_cast<std::int64_t>(nearbyintf(ids[r])) * dim + c] += dy[r * dim + c];
  }
}

}  // namespace

void embedding_forward(GpuContext& ctx, const float* ids, const float* weight, float* y, std::int64_t rows,
                       std::int64_t vocab, std::int64_t dim) {
  if (rows == 0) return;
  DeviceBuffer flag = ctx.alloc(sizeof(unsigned long long));
  const unsigned long long none = ULLONG_MAX;
  ctx.upload(flag.get(), &none, sizeof none);
  embedding_forward_kernel<<<blocks_for(rows * dim), kBlock, 0, stream(ctx)>>>(
      ids, weight, y, rows, vocab, dim, flag.as<unsigned long long>());
  DLSCALE_CHECK_LAUNCH();
  unsigned long long bad = none;
  ctx.download(&bad, flag.get(), sizeof bad);
  if (bad != none) {
    float id = 0;
    ctx.download(&id, ids + bad, sizeof id);
    fail("embedding (GPU): token id " + std::to_string(id) + " at row " + std::to_string(bad) +
         " (sample-major: sample · T + position) is outside [0, " + std::to_string(vocab) + ")");
  }
}

void embedding_backward(GpuContext& ctx, const float* ids, const float* dy, float* dweight, std::int64_t rows,
                        std::int64_t vocab, std::int64_t dim) {
  embedding_backward_kernel<<<blocks_for(dim), kBlock, 0, stream(ctx)>>>(ids, dy, dweight, rows, vocab, dim);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
