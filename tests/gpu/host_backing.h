// HostBacking: an AllocatorBacking on plain host memory with a capacity
// limit, so the caching allocator's policy (reuse, out-of-memory retry,
// stats) is tested on machines without a GPU. Its Ledger outlives the
// allocator that owns the backing, so tests can look at it afterwards.
#pragma once

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include "runtime/core/device_allocator.h"

namespace dlscale::testing {

struct Ledger {
  std::size_t capacity = 0;
  std::size_t live_bytes = 0;     // held by the allocator right now
  int allocations = 0, releases = 0, refusals = 0, fills = 0;
  std::map<void*, std::size_t> live;
};

class HostBacking final : public AllocatorBacking {
 public:
  explicit HostBacking(std::shared_ptr<Ledger> ledger) : ledger_(std::move(ledger)) {}
  ~HostBacking() override {
    for (auto& [ptr, bytes] : ledger_->live) std::free(ptr);
  }

  void* allocate(std::size_t bytes) override {
    if (ledger_->live_bytes + bytes > ledger_->capacity) {
      ++ledger_->refusals;
      return nullptr;
    }
    void* ptr = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!ptr) return nullptr;
    ledger_->live[ptr] = bytes;
    ledger_->live_bytes += bytes;
    ++ledger_->allocations;
    return ptr;
  }

  void release(void* ptr, std::size_t bytes) override {
    auto it = ledger_->live.find(ptr);
    if (it == ledger_->live.end() || it->second != bytes) std::abort();  // the allocator broke its contract
    ledger_->live.erase(it);
    ledger_->live_bytes -= bytes;
    ++ledger_->releases;
    std::free(ptr);
  }

  std::string name() const override { return "host test memory"; }

  void fill_released(void* ptr, std::size_t bytes) override {
    auto it = ledger_->live.find(ptr);
    if (it == ledger_->live.end() || it->second != bytes) std::abort();
    std::memset(ptr, 0xFF, bytes);
    ++ledger_->fills;
  }

 private:
  std::shared_ptr<Ledger> ledger_;
};

}  // namespace dlscale::testing
