// CUDA softmax and fused softmax cross-entropy (layers/softmax.cpp): one
// warp per row, the row's max, exponentials and sums in double after
// subtracting the max, as on the CPU. Per-row losses and hits go to a
// scratch array and one block adds them in a fixed order, so the loss does
// not depend on scheduling.
#include <cmath>
#include <string>

#include "layers/cuda_layers.h"
#include "runtime/core/gpu_context.cuh"

namespace dlscale::gpu {

namespace {

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = kBlock / kWarp;
constexpr unsigned kFull = 0xffffffffu;

__device__ double warp_max(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v = fmax(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
__device__ double warp_sum(double v) {
  for (int o = kWarp / 2; o > 0; o /= 2) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Row max and log(sum exp(z - max)) + max, in double; every lane gets both.
struct RowStats {
  double zmax, sum;
};
__device__ RowStats row_stats(const float* z, std::int64_t k, int lane) {
  double m = -INFINITY;
  for (std::int64_t j = lane; j < k; j += kWarp) m = fmax(m, static_cast<double>(z[j]));
  m = warp_max(m);
  double s = 0;
  for (std::int64_t j = lane; j < k; j += kWarp) s += exp(static_cast<double>(z[j]) - m);
  return {m, warp_sum(s)};
}

// Index of the first maximum of the row (the CPU's sequential scan with >).
__device__ std::int64_t row_argmax(const float* z, std::int64_t k, int lane) {
  std::int64_t best = lane < k ? lane : 0;
  for (std::int64_t j = lane + kWarp; j < k; j += kWarp)
    if (z[j] > z[best]) best = j;
  for (int o = kWarp / 2; o > 0; o /= 2) {
    const std::int64_t other = __shfl_xor_sync(kFull, best, o);
    if (z[other] > z[best] || (z[other] == z[best] && other < best)) best = other;
  }
  return best;
}

__global__ void cross_entropy_rows(const float* __restrict__ logits, const std::int32_t* __restrict__ labels,
                                   std::int64_t n, std::int64_t k, double normalizer, float* __restrict__ dlogits,
                                   double* __restrict__ row_loss, int* __restrict__ row_hit,
                                   unsigned long long* __restrict__ first_bad) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = std::int64_t(gridDim.x) * kRowsPerBlock;
  for (std::int64_t i = blockIdx.x * std::int64_t(kRowsPerBlock) + threadIdx.x / kWarp; i < n; i += warps) {
    const float* z = logits + i * k;
    const std::int32_t label = labels[i];
    const bool valid = label >= 0 && label < k;
    const RowStats st = row_stats(z, k, lane);
    const std::int64_t best = row_argmax(z, k, lane);
    if (lane == 0) {
      if (!valid) atomicMin(first_bad, static_cast<unsigned long long>(i));
      row_loss[i] = valid ? log(st.sum) + st.zmax - static_cast<double>(z[label]) : 0.0;
      row_hit[i] = valid && best == label;
    }
    if (dlogits != nullptr) {
      float* d = dlogits + i * k;
      for (std::int64_t j = lane; j < k; j += kWarp) {
        const double p = exp(static_cast<double>(z[j]) - st.zmax) / st.sum;
        d[j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) / normalizer);
      }
    }
  }
}

struct Totals {
  double loss;
  long long correct;
};

// One block: thread t adds rows t, t + 256, ... in order, then a fixed tree.
__global__ void add_rows(const double* __restrict__ row_loss, const int* __restrict__ row_hit, std::int64_t n,
                         Totals* __restrict__ out) {
  __shared__ double loss[kBlock];
  __shared__ long long hits[kBlock];
  double l = 0;
  long long h = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += kBlock) l += row_loss[i], h += row_hit[i];
  loss[threadIdx.x] = l;
  hits[threadIdx.x] = h;
  __syncthreads();
  for (int half = kBlock / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      loss[threadIdx.x] += loss[threadIdx.x + half];
      hits[threadIdx.x] += hits[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = {loss[0], hits[0]};
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, std::int64_t n, std::int64_t k) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = std::int64_t(gridDim.x) * kRowsPerBlock;
  for (std::int64_t i = blockIdx.x * std::int64_t(kRowsPerBlock) + threadIdx.x / kWarp; i < n; i += warps) {
    const RowStats st = row_stats(x + i * k, k, lane);
    for (std::int64_t j = lane; j < k; j += kWarp)
      y[i * k + j] = static_cast<float>(exp(static_cast<double>(x[i * k + j]) - st.zmax) / st.sum);
  }
}

__global__ void softmax_backward_rows(const float* __restrict__ y, const float* __restrict__ dy,
                                      float* __restrict__ dx, std::int64_t n, std::int64_t k) {
  const int lane = threadIdx.x % kWarp;
  const std::int64_t warps = std::int64_t(gridDim.x) * kRowsPerBlock;
  for (std::int64_t i = blockIdx.x * std::int64_t(kRowsPerBlock) + threadIdx.x / kWarp; i < n; i += warps) {
    double dot = 0;
    for (std::int64_t j = lane; j < k; j += kWarp) dot += static_cast<double>(dy[i * k + j]) * y[i * k + j];
    dot = warp_sum(dot);
    for (std::int64_t j = lane; j < k; j += kWarp)
      dx[i * k + j] = static_cast<float>(y[i * k + j] * (static_cast<double>(dy[i * k + j]) - dot));
  }
}

unsigned row_blocks(std::int64_t n) {
  const std::int64_t need = (n + kRowsPerBlock - 1) / kRowsPerBlock;
  return static_cast<unsigned>(std::clamp<std::int64_t>(need, 1, 132 * 16));
}

void check_rows(std::int64_t k, const char* who) {
  if (k < 1) fail(std::string(who) + " (GPU): logits must be N x K with K >= 1, got K = " + std::to_string(k));
}

}  // namespace

LossSums softmax_cross_entropy(GpuContext& ctx, const float* logits, const std::int32_t* labels,
                               std::int64_t batch, std::int64_t classes, double normalizer, float* dlogits) {
  const char* who = "softmax cross-entropy";
  check_rows(classes, who);
  if (!(normalizer > 0)) fail(std::string(who) + ": normalizer must be positive, got " + std::to_string(normalizer));
  if (batch == 0) return {};
  // One scratch block: per-row losses, hits, then the totals and the first bad label.
  const std::size_t loss_bytes = sizeof(double) * batch, hit_bytes = sizeof(int) * batch;
  const std::size_t hit_at = loss_bytes, totals_at = (loss_bytes + hit_bytes + 15) / 16 * 16;
  const std::size_t bad_at = totals_at + sizeof(Totals);
  DeviceBuffer scratch = ctx.alloc(bad_at + sizeof(unsigned long long));
  char* base = scratch.as<char>();
  auto* first_bad = reinterpret_cast<unsigned long long*>(base + bad_at);
  const unsigned long long none = static_cast<unsigned long long>(batch);
  ctx.upload(first_bad, &none, sizeof none);
  cross_entropy_rows<<<row_blocks(batch), kBlock, 0, stream(ctx)>>>(
      logits, labels, batch, classes, normalizer, dlogits, reinterpret_cast<double*>(base),
      reinterpret_cast<int*>(base + hit_at), first_bad);
  DLSCALE_CHECK_LAUNCH();
  add_rows<<<1, kBlock, 0, stream(ctx)>>>(reinterpret_cast<double*>(base), reinterpret_cast<int*>(base + hit_at),
                                          batch, reinterpret_cast<Totals*>(base + totals_at));
  DLSCALE_CHECK_LAUNCH();
  struct {
    Totals totals;
    unsigned long long bad;
  } host{};
  ctx.download(&host.totals, base + totals_at, sizeof(Totals));
  ctx.download(&host.bad, first_bad, sizeof host.bad);
  if (host.bad < none) {
    std::int32_t label = 0;
    ctx.download(&label, labels + host.bad, sizeof label);
    fail(std::string(who) + " (GPU): label " + std::to_string(label) + " of sample " + std::to_string(host.bad) +
         " is outside [0, " + std::to_string(classes) + ")");
  }
  return {host.totals.loss, host.totals.correct};
}

void softmax_forward(GpuContext& ctx, const float* x, float* y, std::int64_t batch, std::int64_t classes) {
  check_rows(classes, "softmax");
  if (batch == 0) return;
  softmax_rows<<<row_blocks(batch), kBlock, 0, stream(ctx)>>>(x, y, batch, classes);
  DLSCALE_CHECK_LAUNCH();
}

void softmax_backward(GpuContext& ctx, const float* y, const float* dy, float* dx, std::int64_t batch,
                      std::int64_t classes) {
  check_rows(classes, "softmax");
  if (batch == 0) return;
  softmax_backward_rows<<<row_blocks(batch), kBlock, 0, stream(ctx)>>>(y, dy, dx, batch, classes);
  DLSCALE_CHECK_LAUNCH();
}

}  // namespace dlscale::gpu
