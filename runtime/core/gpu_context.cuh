// GpuContext's CUDA state and the launch helpers every .cu file of the GPU
// backend shares. CUDA sources only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "runtime/core/cuda_check.h"
#include "runtime/core/gpu_context.h"

namespace dlscale {

struct GpuContext::Impl {
  int device = 0;
  int rank = 0;
  GpuOptions options;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  std::unique_ptr<CachingAllocator> allocator, pinned;
  DeviceBuffer workspace;  // grown on demand, shared by every cuDNN call of the stream
  // Descriptors and chosen algorithms, made once per layer shape (the conv2d
  // plans), keyed by a string of their parameters.
  std::map<std::string, std::shared_ptr<void>> plans;

  Impl() = default;
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;
  // Also cleans up after a constructor that failed half-way.
  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);  // queued kernels may still use blocks freed below
    plans.clear();
    workspace = DeviceBuffer();
    allocator.reset();
    pinned.reset();
    if (cudnn) cudnnDestroy(cudnn);
    if (cublas) cublasDestroy(cublas);
    if (stream) cudaStreamDestroy(stream);
  }

  void* workspace_of(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    if (workspace.bytes() < bytes) {
      workspace = DeviceBuffer();  // give the old block back before asking for the larger one
      workspace = DeviceBuffer(*allocator, bytes);
    }
    return workspace.get();
  }

  template <class Plan>
  Plan& plan(const std::string& key, const std::function<std::shared_ptr<Plan>()>& make) {
    auto it = plans.find(key);
    if (it == plans.end()) it = plans.emplace(key, make()).first;
    return *static_cast<Plan*>(it->second.get());
  }
};

namespace gpu {

constexpr int kBlock = 256;

// Blocks for a grid-stride loop over n elements: enough to fill an H200
// (132 SMs x 16 blocks of 256), never more than the elements need.
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t need = (n + kBlock - 1) / kBlock;
  return static_cast<unsigned>(std::clamp<std::int64_t>(need, 1, 132 * 16));
}

inline cudaStream_t stream(GpuContext& ctx) { return ctx.impl().stream; }

}  // namespace gpu
}  // namespace dlscale
