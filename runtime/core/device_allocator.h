// Caching allocator for GPU memory (and pinned host staging buffers), after
// PyTorch's CUDACachingAllocator: cudaMalloc and cudaFree synchronize the
// device and cost tens of microseconds, so blocks are never given back
// during training. A freed block goes to the free list of its size class and
// the next request of that class takes it; after the first training step
// every request of a step is a cache hit.
//
// The caching policy lives here and knows nothing about CUDA: memory comes
// from an AllocatorBacking (raw allocate/release), which is cudaMalloc in
// device_allocator_cuda.cu and plain host memory in the CPU tests.
//
// Stream semantics: blocks are reused in host order. That is safe while
// every user of the allocator queues its work on one stream (the compute
// stream): a block released while kernels still read it is only handed to
// work queued after them. A block used on another stream (the batch
// stager's copy stream) must be taken while the compute stream is idle and
// kept for the whole run: the allocator records no events per block (see
// BatchStager in runtime/training/gpu_training.cu for why).
//
// Debug mode (DLSCALE_ALLOCATOR=debug): a released block is filled with
// 0xFF bytes (NaN as float32, fp16, bf16 and float64; -1 as int32), queued
// on the compute stream behind the work that last used it, and never handed
// out again. A kernel that reads a block after its release then reads NaN,
// and work on another stream can never be given a block the compute stream
// still uses, so a run that differs from the same run in debug mode has a
// use-after-release or a stream race. Memory only grows in that mode: it is
// for short checking runs, not for training.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace dlscale {

// Where the memory comes from.
class AllocatorBacking {
 public:
  virtual ~AllocatorBacking() = default;
  // nullptr when the memory is exhausted (the allocator then frees its cache
  // and retries); any other failure throws.
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void release(void* ptr, std::size_t bytes) = 0;
  // Names the memory in errors: "GPU 0", "pinned host memory".
  virtual std::string name() const = 0;
  // Debug mode: sets every byte of a released block to 0xFF, ordered after
  // the work queued on it so far. The default fails naming the backing.
  virtual void fill_released(void* ptr, std::size_t bytes);
};

enum class AllocatorMode {
  caching,  // released blocks go to their free list and are handed out again
  debug,    // released blocks are filled with 0xFF (NaN) and never handed out again
};
// DLSCALE_ALLOCATOR: unset, "" or "caching" -> caching, "debug" -> debug;
// anything else is a UsageError naming the variable and the values.
AllocatorMode allocator_mode_from_env();

struct AllocatorStats {
  std::int64_t requests = 0;            // allocate() calls with bytes > 0
  std::int64_t cache_hits = 0;          // requests served from a free list
  std::int64_t backing_allocations = 0; // successful allocations from the backing (cudaMalloc)
  std::int64_t backing_releases = 0;    // blocks given back (empty_cache, OOM retry, destructor)
  std::int64_t oom_retries = 0;         // requests that emptied the cache and tried again
  std::size_t bytes_in_use = 0;         // rounded sizes of the blocks handed out
  std::size_t bytes_cached = 0;         // blocks on free lists
  std::size_t peak_bytes_in_use = 0;
  std::size_t peak_bytes_reserved = 0;  // in use + cached (+ retired), i.e. held from the backing
  std::int64_t retired_blocks = 0;      // debug mode: released blocks, filled and kept out of use
  std::size_t bytes_retired = 0;
};

class CachingAllocator {
 public:
  // rank names this process in the out-of-memory error.
  CachingAllocator(std::unique_ptr<AllocatorBacking> backing, int rank,
                   AllocatorMode mode = AllocatorMode::caching);
  // Gives every block back, cached, retired and in use: no buffer may outlive it.
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes`, aligned as the backing aligns (256 bytes for
  // cudaMalloc); nullptr for 0 bytes. When the backing is exhausted the cache
  // is emptied and the allocation retried once; if that fails too, throws an
  // Error naming the rank, the bytes asked, in use and cached.
  void* allocate(std::size_t bytes);
  // Returns a block from allocate() to its free list (debug mode: fills and
  // retires it); nullptr is ignored and a pointer this allocator did not
  // hand out is an error.
  void release(void* ptr);
  // Gives every cached (free) block back to the backing; retired blocks stay
  // held, so the backing cannot hand their addresses out again either.
  void empty_cache();

  AllocatorStats stats() const;
  AllocatorMode mode() const { return mode_; }
  const AllocatorBacking& backing() const { return *backing_; }

  // The size class of a request: multiples of 512 bytes up to 1 MiB, above
  // that 4 classes per power of two (at most 25% rounding waste), so requests
  // that differ a little (the last, smaller batch of an epoch) share blocks.
  static std::size_t round_size(std::size_t bytes);

 private:
  void* allocate_locked(std::size_t rounded);
  void empty_cache_locked();

  std::unique_ptr<AllocatorBacking> backing_;
  int rank_;
  AllocatorMode mode_;
  mutable std::mutex mutex_;  // the prefetch thread stages batches while the trainer runs
  std::map<std::size_t, std::vector<void*>> free_;  // size class -> free blocks
  std::unordered_map<void*, std::size_t> in_use_;   // block -> size class
  std::vector<std::pair<void*, std::size_t>> retired_;  // debug mode: block, size class
  AllocatorStats stats_;
};

// "12.0 MiB (12582912 bytes)", for errors and reports.
std::string format_bytes(std::size_t bytes);

// The CUDA backings (device_allocator_cuda.cu). Builds without CUDA throw
// an Error saying so.
// cudaMalloc on `device`; `stream` (a cudaStream_t, the compute stream) is
// where debug mode queues the fill of released blocks.
std::unique_ptr<AllocatorBacking> make_cuda_device_backing(int device, void* stream = nullptr);
std::unique_ptr<AllocatorBacking> make_cuda_pinned_backing();            // cudaMallocHost

}  // namespace dlscale
