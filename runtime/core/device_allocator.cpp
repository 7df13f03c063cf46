// The caching policy of CachingAllocator (no CUDA here; see the header).
#include "runtime/core/device_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "dlscale/config.h"
#include "runtime/core/error.h"

namespace dlscale {

namespace {
constexpr std::size_t kSmallStep = 512;
constexpr std::size_t kSmallLimit = std::size_t(1) << 20;

// Debug mode never gives memory back, so it runs out sooner; say so.
std::string retired_note(const AllocatorStats& s) {
  if (s.retired_blocks == 0) return "";
  return "; " + format_bytes(s.bytes_retired) + " retired by DLSCALE_ALLOCATOR=debug (released blocks are never "
         "reused in that mode; unset it for a real run)";
}
}  // namespace

std::string format_bytes(std::size_t bytes) {
  char text[64];
  const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  if (bytes >= (std::size_t(1) << 30))
    std::snprintf(text, sizeof text, "%.2f GiB (%zu bytes)", mib / 1024.0, bytes);
  else
    std::snprintf(text, sizeof text, "%.1f MiB (%zu bytes)", mib, bytes);
  return text;
}

std::size_t CachingAllocator::round_size(std::size_t bytes) {
  if (bytes <= kSmallLimit) return std::max(kSmallStep, (bytes + kSmallStep - 1) / kSmallStep * kSmallStep);
  // bytes in (2^k, 2^(k+1)]: steps of 2^(k-2), four classes per power of two.
  const int k = std::bit_width(bytes - 1) - 1;
  const std::size_t step = std::size_t(1) << (k - 2);
  if (bytes > std::numeric_limits<std::size_t>::max() - step) return bytes;  // no class above; the backing refuses
  return (bytes + step - 1) / step * step;
}

void AllocatorBacking::fill_released(void*, std::size_t) {
  fail("the caching allocator's debug mode (DLSCALE_ALLOCATOR=debug) cannot fill released blocks of " + name());
}

AllocatorMode allocator_mode_from_env() {
  const char* v = std::getenv("DLSCALE_ALLOCATOR");
  const std::string value = v ? v : "";
  if (value.empty() || value == "caching") return AllocatorMode::caching;
  if (value == "debug") return AllocatorMode::debug;
  throw UsageError("DLSCALE_ALLOCATOR=" + value + " is not an allocator mode; use caching (the default) or debug");
}

CachingAllocator::CachingAllocator(std::unique_ptr<AllocatorBacking> backing, int rank, AllocatorMode mode)
    : backing_(std::move(backing)), rank_(rank), mode_(mode) {
  DLSCALE_REQUIRE(backing_ != nullptr, "caching allocator: no backing memory given");
}

CachingAllocator::~CachingAllocator() {
  std::lock_guard lock(mutex_);
  // A failing release while tearing down (a lost device) must not terminate
  // the process from a destructor; the memory goes with the context anyway.
  try {
    empty_cache_locked();
    for (auto& [ptr, size] : in_use_) backing_->release(ptr, size);
    for (auto& [ptr, size] : retired_) backing_->release(ptr, size);
  } catch (const std::exception&) {
  }
}

void* CachingAllocator::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t rounded = round_size(bytes);
  std::lock_guard lock(mutex_);
  ++stats_.requests;
  void* ptr = nullptr;
  auto slot = free_.find(rounded);
  if (slot != free_.end() && !slot->second.empty()) {
    ptr = slot->second.back();
    slot->second.pop_back();
    stats_.bytes_cached -= rounded;
    ++stats_.cache_hits;
  } else {
    ptr = allocate_locked(rounded);
    if (ptr == nullptr) {
      // Cached blocks of other classes may be what is missing: give them back and try once more.
      const AllocatorStats before = stats_;
      ++stats_.oom_retries;
      empty_cache_locked();
      ptr = allocate_locked(rounded);
      if (ptr == nullptr)
        fail("rank " + std::to_string(rank_) + ": out of memory on " + backing_->name() + ": asked for " +
             format_bytes(bytes) + " (size class " + format_bytes(rounded) + ") with " +
             format_bytes(before.bytes_in_use) + " in use and " + format_bytes(before.bytes_cached) +
             " cached" + retired_note(before) +
             "; the cache was emptied and the allocation retried. Try a smaller mini-batch-size.");
    }
  }
  in_use_.emplace(ptr, rounded);
  stats_.bytes_in_use += rounded;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  stats_.peak_bytes_reserved =
      std::max(stats_.peak_bytes_reserved, stats_.bytes_in_use + stats_.bytes_cached + stats_.bytes_retired);
  return ptr;
}

void* CachingAllocator::allocate_locked(std::size_t rounded) {
  void* ptr = backing_->allocate(rounded);
  if (ptr != nullptr) ++stats_.backing_allocations;
  return ptr;
}

void CachingAllocator::release(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard lock(mutex_);
  auto it = in_use_.find(ptr);
  if (it == in_use_.end())
    fail("rank " + std::to_string(rank_) + ": a block of " + backing_->name() +
         " was released that the caching allocator did not hand out (or released twice)");
  const std::size_t rounded = it->second;
  if (mode_ == AllocatorMode::debug) {
    // Filled before it leaves in_use_: if the fill throws, the block is still accounted for.
    backing_->fill_released(ptr, rounded);
    retired_.emplace_back(ptr, rounded);
    ++stats_.retired_blocks;
    stats_.bytes_retired += rounded;
  } else {
    free_[rounded].push_back(ptr);
    stats_.bytes_cached += rounded;
  }
  in_use_.erase(it);
  stats_.bytes_in_use -= rounded;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  empty_cache_locked();
}

void CachingAllocator::empty_cache_locked() {
  for (auto& [rounded, blocks] : free_) {
    while (!blocks.empty()) {
      backing_->release(blocks.back(), rounded);
      blocks.pop_back();
      stats_.bytes_cached -= rounded;
      ++stats_.backing_releases;
    }
  }
  free_.clear();
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

#if !DLSCALE_HAVE_CUDA
std::unique_ptr<AllocatorBacking> make_cuda_device_backing(int, void*) {
  fail("GPU memory was requested but this dlscale was built without CUDA (DLSCALE_CUDA=OFF or no toolkit found)");
}
std::unique_ptr<AllocatorBacking> make_cuda_pinned_backing() {
  fail("pinned host memory was requested but this dlscale was built without CUDA (DLSCALE_CUDA=OFF or no toolkit "
       "found)");
}
#endif

}  // namespace dlscale
