// DeviceBuffer: one block of a CachingAllocator, owned (move-only) and given
// back to the allocator's free list when the buffer goes away. Holds device
// memory or pinned host memory, whichever the allocator's backing provides;
// it never dereferences the pointer, so it compiles without CUDA.
#pragma once

#include <cstddef>
#include <utility>

#include "runtime/core/device_allocator.h"

namespace dlscale {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(CachingAllocator& allocator, std::size_t bytes)
      : allocator_(&allocator), ptr_(allocator.allocate(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() { reset(); }

  DeviceBuffer(DeviceBuffer&& other) noexcept
      : allocator_(other.allocator_), ptr_(std::exchange(other.ptr_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    if (this != &other) {
      reset();
      allocator_ = other.allocator_;
      ptr_ = std::exchange(other.ptr_, nullptr);
      bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Back to the allocator's cache (never to the driver).
  void reset() noexcept {
    if (ptr_ != nullptr) {
      try {
        allocator_->release(ptr_);
      } catch (...) {
        // only a foreign pointer throws, and this one came from allocator_
      }
    }
    ptr_ = nullptr;
    bytes_ = 0;
  }

  void* get() const { return ptr_; }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  std::size_t bytes() const { return bytes_; }  // as asked; the block may be larger
  template <class T>
  std::size_t count() const {
    return bytes_ / sizeof(T);
  }
  bool empty() const { return ptr_ == nullptr; }

 private:
  CachingAllocator* allocator_ = nullptr;
  void* ptr_ = nullptr;
  std::size_t bytes_ = 0;
};

}  // namespace dlscale
