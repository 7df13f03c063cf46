// The CUDA backings of CachingAllocator: cudaMalloc/cudaFree for device
// memory, cudaMallocHost/cudaFreeHost for pinned staging buffers (host
// memory the GPU copies from asynchronously, as the loader's batches).
#include <string>

#include "runtime/core/cuda_check.h"
#include "runtime/core/device_allocator.h"

namespace dlscale {

namespace {

// Out of memory is the one failure the allocator handles (empty the cache,
// retry): it comes back as nullptr, every other error throws.
bool out_of_memory(cudaError_t rc) {
  if (rc != cudaErrorMemoryAllocation) return false;
  cudaGetLastError();  // not sticky: clear it so the retry starts clean
  return true;
}

class CudaDeviceBacking final : public AllocatorBacking {
 public:
  CudaDeviceBacking(int device, cudaStream_t stream) : device_(device), stream_(stream) {}

  void* allocate(std::size_t bytes) override {
    select();
    void* ptr = nullptr;
    const cudaError_t rc = cudaMalloc(&ptr, bytes);
    if (out_of_memory(rc)) return nullptr;
    DLSCALE_CHECK_CUDA(rc);
    return ptr;
  }

  void release(void* ptr, std::size_t) override {
    select();
    DLSCALE_CHECK_CUDA(cudaFree(ptr));
  }

  std::string name() const override { return "GPU " + std::to_string(device_); }

  // On the compute stream, behind the kernels that may still read the block
  // (they were queued before its release), ahead of anything queued after.
  void fill_released(void* ptr, std::size_t bytes) override {
    if (stream_ == nullptr) return AllocatorBacking::fill_released(ptr, bytes);  // fails: no stream to order on
    select();
    DLSCALE_CHECK_CUDA(cudaMemsetAsync(ptr, 0xFF, bytes, stream_));
  }

 private:
  // The allocator may be used from a thread (the loader's) whose current device was never set.
  void select() const {
    int current = -1;
    DLSCALE_CHECK_CUDA(cudaGetDevice(&current));
    if (current != device_) DLSCALE_CHECK_CUDA(cudaSetDevice(device_));
  }

  int device_;
  cudaStream_t stream_;
};

class CudaPinnedBacking final : public AllocatorBacking {
 public:
  void* allocate(std::size_t bytes) override {
    void* ptr = nullptr;
    const cudaError_t rc = cudaMallocHost(&ptr, bytes);
    if (out_of_memory(rc)) return nullptr;
    DLSCALE_CHECK_CUDA(rc);
    return ptr;
  }

  void release(void* ptr, std::size_t) override { DLSCALE_CHECK_CUDA(cudaFreeHost(ptr)); }

  std::string name() const override { return "pinned host memory"; }
};

}  // namespace

std::unique_ptr<AllocatorBacking> make_cuda_device_backing(int device, void* stream) {
  return std::make_unique<CudaDeviceBacking>(device, static_cast<cudaStream_t>(stream));
}

std::unique_ptr<AllocatorBacking> make_cuda_pinned_backing() { return std::make_unique<CudaPinnedBacking>(); }

}  // namespace dlscale
