// GpuContext: what every CUDA layer function needs, created once per rank and
// used for the whole run: the device, one compute stream, the cuBLAS and
// cuDNN handles bound to it, the caching allocators (device memory and pinned
// host staging), a cuDNN workspace and the cuDNN convolution plans made so
// far. CUDA builds only (runtime/core/gpu_context.cu); the header itself has no
// CUDA types, so plain C++ (tests, the trainer) can include it.
//
// Everything a context queues runs in order on its stream; the layer
// functions return as soon as their work is queued, except those that return
// host values (losses, norms), which wait for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "runtime/core/device_allocator.h"
#include "runtime/core/device_buffer.h"
#include "runtime/core/tensor.h"

namespace dlscale {

struct GpuOptions {
  // cuDNN algorithms are restricted to deterministic ones (no atomics in the
  // backward convolutions), so two runs give bitwise equal gradients.
  bool deterministic = false;
  // TF32 tensor cores (10-bit mantissa inputs) for cuBLAS GEMMs and cuDNN
  // convolutions: faster on sm_80+, but ~1e-3 relative error; off keeps
  // float32 results within GEMM rounding of the CPU backend.
  bool allow_tf32 = false;
  // Largest cuDNN workspace an algorithm may ask for.
  std::size_t max_workspace_bytes = std::size_t(512) << 20;
};

class GpuContext {
 public:
  // Binds this thread to `device`; rank names the process in errors.
  GpuContext(int device, int rank, GpuOptions options = {});
  ~GpuContext();
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;

  int device() const;
  int rank() const;
  const GpuOptions& options() const;
  void* stream() const;  // the cudaStream_t all work is queued on
  // Blocks until the stream is idle; reports kernel errors queued so far.
  void synchronize();

  CachingAllocator& allocator();         // device memory
  CachingAllocator& pinned_allocator();  // page-locked host memory for staging
  DeviceBuffer alloc(std::size_t bytes) { return DeviceBuffer(allocator(), bytes); }

  // Host <-> device copies on the stream; download waits for the copy.
  void upload(void* device_dst, const void* host_src, std::size_t bytes);
  void download(void* host_dst, const void* device_src, std::size_t bytes);
  // Queues dst = 0 (bytes).
  void zero(void* device_dst, std::size_t bytes);

  struct Impl;  // CUDA handles, in runtime/core/gpu_context.cuh
  Impl& impl();

 private:
  std::unique_ptr<Impl> impl_;
};

// A float32 tensor copied to a new device buffer, and back: the GPU backend
// computes in float32 only.
DeviceBuffer to_device(GpuContext& ctx, const Tensor& host);
Tensor to_host(GpuContext& ctx, const void* device_src, const Shape& shape);

}  // namespace dlscale
