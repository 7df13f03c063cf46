// The caching allocator's policy on a capacity-limited host backing (runs on
// every machine): size classes, no backing allocation once training steps
// repeat, out-of-memory retry then a clear error, the stats, and debug mode
// (DLSCALE_ALLOCATOR=debug: released blocks filled with NaN, never reused,
// held until the allocator goes). With CUDA
// compiled in but no GPU, the CUDA backing's failure goes through the check
// family and says why.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <random>
#include <vector>

#include "dlscale/config.h"
#include "expect_error.h"
#include "gpu/host_backing.h"
#include "runtime/core/device_buffer.h"
#include "runtime/core/gpu.h"

namespace dlscale {
namespace {

using testing::expect_error;
using testing::HostBacking;
using testing::Ledger;

constexpr std::size_t MiB = std::size_t(1) << 20;

struct Fixture {
  std::shared_ptr<Ledger> ledger = std::make_shared<Ledger>();
  std::unique_ptr<CachingAllocator> allocator;
  explicit Fixture(std::size_t capacity, int rank = 0, AllocatorMode mode = AllocatorMode::caching) {
    ledger->capacity = capacity;
    allocator = std::make_unique<CachingAllocator>(std::make_unique<HostBacking>(ledger), rank, mode);
  }
};

TEST(CachingAllocator, SizeClassesCoverRequestsWithBoundedWaste) {
  EXPECT_EQ(CachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CachingAllocator::round_size(512), 512u);
  EXPECT_EQ(CachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocator::round_size(MiB), MiB);
  EXPECT_EQ(CachingAllocator::round_size(MiB + 1), MiB + MiB / 4);
  EXPECT_EQ(CachingAllocator::round_size(3 * MiB), 3 * MiB);
  // Requests a little apart share a class, so their blocks are interchangeable.
  EXPECT_EQ(CachingAllocator::round_size(MiB + 100 * 1024), CachingAllocator::round_size(MiB + 200 * 1024));
  std::mt19937_64 gen(7);
  std::size_t previous_bytes = 0, previous_class = 0;
  std::vector<std::size_t> sizes;
  for (int i = 0; i < 2000; ++i) sizes.push_back(1 + gen() % (std::size_t(3) << 30));
  std::sort(sizes.begin(), sizes.end());
  for (std::size_t bytes : sizes) {
    const std::size_t c = CachingAllocator::round_size(bytes);
    ASSERT_GE(c, bytes);
    if (bytes > MiB) {
      ASSERT_LE(c - bytes, bytes / 4) << bytes;  // at most 25% waste above 1 MiB
    } else {
      ASSERT_LT(c - bytes, 512u) << bytes;
    }
    ASSERT_GE(c, previous_class) << "classes must grow with the request: " << previous_bytes << " -> " << bytes;
    previous_bytes = bytes, previous_class = c;
  }
}

// One "training step": activations allocated in forward order, released in
// backward order, plus a workspace and a gradient buffer that live across it.
void step(CachingAllocator& a, const std::vector<std::size_t>& sizes) {
  std::vector<void*> blocks;
  for (std::size_t s : sizes) blocks.push_back(a.allocate(s));
  void* workspace = a.allocate(3 * MiB + 17);
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) a.release(*it);
  a.release(workspace);
}

TEST(CachingAllocator, RepeatedStepsNeedNoBackingAllocationAfterTheFirst) {
  Fixture f(256 * MiB);
  const std::vector<std::size_t> sizes = {64 * 784 * 4, 64 * 128 * 4, 64 * 128 * 4, 64 * 10 * 4, 5 * MiB, 100};
  step(*f.allocator, sizes);
  const AllocatorStats warm = f.allocator->stats();
  const int backing_after_warmup = f.ledger->allocations;
  EXPECT_EQ(warm.backing_allocations, backing_after_warmup);
  EXPECT_EQ(warm.bytes_in_use, 0u);
  EXPECT_EQ(warm.bytes_cached, f.ledger->live_bytes) << "every block came back to the cache";

  for (int i = 0; i < 20; ++i) step(*f.allocator, sizes);
  const AllocatorStats s = f.allocator->stats();
  EXPECT_EQ(f.ledger->allocations, backing_after_warmup) << "steps after the first must not touch the backing";
  EXPECT_EQ(f.ledger->releases, 0);
  const std::int64_t per_step = static_cast<std::int64_t>(sizes.size()) + 1;
  EXPECT_EQ(s.requests, 21 * per_step);
  EXPECT_EQ(s.cache_hits, s.requests - s.backing_allocations);
  EXPECT_EQ(s.cache_hits, 20 * per_step);
  EXPECT_EQ(s.bytes_in_use, 0u);

  // The peak is the whole step's rounded sizes, and the cache holds exactly that.
  std::size_t expected_peak = CachingAllocator::round_size(3 * MiB + 17);
  for (std::size_t b : sizes) expected_peak += CachingAllocator::round_size(b);
  EXPECT_EQ(s.peak_bytes_in_use, expected_peak);
  EXPECT_EQ(s.bytes_cached, expected_peak);
  EXPECT_EQ(s.peak_bytes_reserved, expected_peak);
}

TEST(CachingAllocator, EmptyCacheGivesFreeBlocksBackAndKeepsUsedOnes) {
  Fixture f(64 * MiB);
  void* kept = f.allocator->allocate(2 * MiB);
  f.allocator->release(f.allocator->allocate(MiB));
  f.allocator->release(f.allocator->allocate(4096));
  EXPECT_EQ(f.allocator->stats().bytes_cached, MiB + 4096);
  f.allocator->empty_cache();
  const AllocatorStats s = f.allocator->stats();
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.backing_releases, 2);
  EXPECT_EQ(f.ledger->live_bytes, 2 * MiB) << "only the block in use is still held";
  EXPECT_EQ(s.bytes_in_use, 2 * MiB);
  f.allocator->release(kept);
  f.allocator.reset();
  EXPECT_EQ(f.ledger->live_bytes, 0u) << "the allocator gives everything back when it goes";
}

TEST(CachingAllocator, OutOfMemoryEmptiesTheCacheRetriesThenNamesRankAndSizes) {
  Fixture f(10 * MiB, /*rank=*/3);
  CachingAllocator& a = *f.allocator;
  // 3 MiB blocks cached: a 4 MiB request does not fit next to them.
  std::vector<void*> blocks = {a.allocate(3 * MiB), a.allocate(3 * MiB), a.allocate(3 * MiB)};
  for (void* b : blocks) a.release(b);
  ASSERT_EQ(a.stats().bytes_cached, 9 * MiB);
  void* big = a.allocate(4 * MiB);
  ASSERT_NE(big, nullptr);
  AllocatorStats s = a.stats();
  EXPECT_EQ(s.oom_retries, 1);
  EXPECT_EQ(s.backing_releases, 3) << "the cache was given back to make room";
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(f.ledger->refusals, 1);

  // 4 MiB in use and 2 MiB cached; 8 MiB cannot fit even after emptying the cache.
  a.release(a.allocate(2 * MiB));
  try {
    a.allocate(8 * MiB);
    ADD_FAILURE() << "expected an out-of-memory error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 3"), std::string::npos) << m;
    EXPECT_NE(m.find("out of memory on host test memory"), std::string::npos) << m;
    EXPECT_NE(m.find("asked for 8.0 MiB (8388608 bytes)"), std::string::npos) << m;
    EXPECT_NE(m.find("with 4.0 MiB (4194304 bytes) in use and 2.0 MiB (2097152 bytes) cached"), std::string::npos)
        << m;
    EXPECT_NE(m.find("smaller mini-batch-size"), std::string::npos) << m;
  }
  s = a.stats();
  EXPECT_EQ(s.oom_retries, 2);
  EXPECT_EQ(s.bytes_cached, 0u) << "the failed retry still emptied the cache";
  EXPECT_EQ(s.bytes_in_use, 4 * MiB);
  EXPECT_EQ(f.ledger->live_bytes, 4 * MiB);
  // The allocator is still usable after the error.
  void* small = a.allocate(MiB);
  EXPECT_NE(small, nullptr);
  a.release(small);
  a.release(big);
}

TEST(CachingAllocator, ForeignAndDoubleReleasesAreErrors) {
  Fixture f(MiB);
  int local = 0;
  expect_error([&] { f.allocator->release(&local); }, "did not hand out");
  void* p = f.allocator->allocate(100);
  f.allocator->release(p);
  expect_error([&] { f.allocator->release(p); }, "released twice");
  f.allocator->release(nullptr);  // ignored, like free(nullptr)
  EXPECT_EQ(f.allocator->allocate(0), nullptr);
  EXPECT_EQ(f.allocator->stats().requests, 1);
}

TEST(CachingAllocator, DebugModeFillsReleasedBlocksWithNanAndNeverReusesThem) {
  Fixture f(256 * MiB, 0, AllocatorMode::debug);
  CachingAllocator& a = *f.allocator;
  EXPECT_EQ(a.mode(), AllocatorMode::debug);
  const std::vector<std::size_t> sizes = {64 * 784 * 4, 64 * 128 * 4, 64 * 128 * 4, 64 * 10 * 4, 5 * MiB, 100};
  std::set<void*> seen;
  for (int i = 0; i < 5; ++i) {
    std::vector<void*> blocks;
    for (std::size_t s : sizes) {
      void* p = a.allocate(s);
      ASSERT_TRUE(seen.insert(p).second) << "block of " << s << " bytes handed out twice in step " << i;
      // What a step writes; a reader after the release must not see it.
      std::vector<float> ones(s / sizeof(float), 1.0f);
      std::memcpy(p, ones.data(), ones.size() * sizeof(float));
      blocks.push_back(p);
    }
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      a.release(blocks[k]);
      const std::size_t rounded = CachingAllocator::round_size(sizes[k]);
      const auto* f32 = static_cast<const float*>(blocks[k]);
      for (std::size_t e = 0; e < rounded / sizeof(float); ++e)
        ASSERT_TRUE(std::isnan(f32[e])) << "element " << e << " of a released " << sizes[k] << "-byte block";
      // 0xFF bytes are NaN at every width the GPU path computes in, and -1 as a label.
      const auto* f64 = static_cast<const double*>(blocks[k]);
      ASSERT_TRUE(std::isnan(f64[0]));
      std::uint16_t half = 0;
      std::memcpy(&half, blocks[k], sizeof half);
      EXPECT_EQ(half & 0x7C00, 0x7C00) << "fp16 exponent all ones";
      EXPECT_NE(half & 0x03FF, 0) << "fp16 mantissa non-zero";
      std::int32_t label = 0;
      std::memcpy(&label, blocks[k], sizeof label);
      EXPECT_EQ(label, -1);
    }
  }
  const AllocatorStats s = a.stats();
  const std::int64_t blocks = 5 * static_cast<std::int64_t>(sizes.size());
  EXPECT_EQ(s.cache_hits, 0);
  EXPECT_EQ(s.backing_allocations, blocks);
  EXPECT_EQ(f.ledger->fills, blocks);
  EXPECT_EQ(s.retired_blocks, blocks);
  EXPECT_EQ(s.bytes_cached, 0u);
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.bytes_retired, f.ledger->live_bytes) << "retired blocks stay held from the backing";
  EXPECT_EQ(s.peak_bytes_reserved, s.bytes_retired);

  // Emptying the cache must not give them back either: the backing would hand the addresses out again.
  a.empty_cache();
  EXPECT_EQ(f.ledger->releases, 0);
  EXPECT_EQ(f.ledger->live_bytes, s.bytes_retired);
  f.allocator.reset();
  EXPECT_EQ(f.ledger->live_bytes, 0u) << "the allocator gives retired blocks back when it goes";
}

TEST(CachingAllocator, CachingModeReusesReleasedBlocksUnfilled) {
  // The contrast to debug mode: the same block comes back with its contents.
  Fixture f(MiB);
  void* p = f.allocator->allocate(1000);
  const float value = 3.5f;
  std::memcpy(p, &value, sizeof value);
  f.allocator->release(p);
  void* q = f.allocator->allocate(900);
  EXPECT_EQ(q, p);
  float read = 0;
  std::memcpy(&read, q, sizeof read);
  EXPECT_EQ(read, value);
  EXPECT_EQ(f.ledger->fills, 0);
  f.allocator->release(q);
}

TEST(CachingAllocator, DebugModeOutOfMemoryNamesTheRetiredBytes) {
  Fixture f(4 * MiB, /*rank=*/2, AllocatorMode::debug);
  CachingAllocator& a = *f.allocator;
  a.release(a.allocate(3 * MiB));
  try {
    a.allocate(2 * MiB);
    ADD_FAILURE() << "expected an out-of-memory error: 3 MiB are retired out of 4";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 2"), std::string::npos) << m;
    EXPECT_NE(m.find("3.0 MiB (3145728 bytes) retired by DLSCALE_ALLOCATOR=debug"), std::string::npos) << m;
  }
}

TEST(CachingAllocator, DebugModeNeedsABackingThatCanFill) {
  // A backing without fill_released (the CUDA device backing without a stream) fails at the first release.
  struct NoFill final : AllocatorBacking {
    std::vector<std::unique_ptr<char[]>> blocks;
    void* allocate(std::size_t bytes) override { return blocks.emplace_back(new char[bytes]).get(); }
    void release(void*, std::size_t) override {}
    std::string name() const override { return "plain memory"; }
  };
  CachingAllocator a(std::make_unique<NoFill>(), 0, AllocatorMode::debug);
  void* p = a.allocate(100);
  expect_error([&] { a.release(p); }, "cannot fill released blocks of plain memory");
  EXPECT_EQ(a.stats().bytes_in_use, 512u) << "a block that could not be filled stays accounted as in use";
}

// Sets DLSCALE_ALLOCATOR for one test and restores what was there.
class AllocatorEnv {
 public:
  explicit AllocatorEnv(const char* value) {
    if (const char* old = std::getenv("DLSCALE_ALLOCATOR")) old_ = old, had_ = true;
    if (value) setenv("DLSCALE_ALLOCATOR", value, 1);
    else unsetenv("DLSCALE_ALLOCATOR");
  }
  ~AllocatorEnv() {
    if (had_) setenv("DLSCALE_ALLOCATOR", old_.c_str(), 1);
    else unsetenv("DLSCALE_ALLOCATOR");
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(CachingAllocator, ModeComesFromDlscaleAllocator) {
  {
    AllocatorEnv env(nullptr);
    EXPECT_EQ(allocator_mode_from_env(), AllocatorMode::caching);
  }
  {
    AllocatorEnv env("");
    EXPECT_EQ(allocator_mode_from_env(), AllocatorMode::caching);
  }
  {
    AllocatorEnv env("caching");
    EXPECT_EQ(allocator_mode_from_env(), AllocatorMode::caching);
  }
  {
    AllocatorEnv env("debug");
    EXPECT_EQ(allocator_mode_from_env(), AllocatorMode::debug);
  }
  AllocatorEnv env("Debug");
  try {
    allocator_mode_from_env();
    ADD_FAILURE() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("DLSCALE_ALLOCATOR=Debug is not an allocator mode; use caching"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceBuffer, GivesItsBlockBackToTheCacheAndMoves) {
  Fixture f(MiB);
  {
    DeviceBuffer a(*f.allocator, 1000);
    EXPECT_NE(a.get(), nullptr);
    EXPECT_EQ(a.bytes(), 1000u);
    DeviceBuffer b = std::move(a);
    EXPECT_TRUE(a.empty());
    EXPECT_EQ(f.allocator->stats().bytes_in_use, 1024u);
    DeviceBuffer c(*f.allocator, 1000);
    c = std::move(b);  // c's first block goes back, b's moves in
    EXPECT_EQ(f.allocator->stats().bytes_in_use, 1024u);
    EXPECT_EQ(f.allocator->stats().bytes_cached, 1024u);
  }
  const AllocatorStats s = f.allocator->stats();
  EXPECT_EQ(s.bytes_in_use, 0u);
  EXPECT_EQ(s.bytes_cached, 2048u);
  EXPECT_EQ(f.ledger->releases, 0) << "buffers return blocks to the cache, never to the backing";
}

TEST(CudaBacking, FailsWithAClearErrorWhereItCannotWork) {
#if DLSCALE_HAVE_CUDA
  GpuInfo gpu = query_gpus();
  if (gpu.device_count > 0) GTEST_SKIP() << "a GPU is present; tests/gpu/layer_gpu_test covers the CUDA backing";
  CachingAllocator a(make_cuda_device_backing(0), 5);
  try {
    a.allocate(1024);
    ADD_FAILURE() << "expected an error without a GPU";
  } catch (const Error& e) {
    const std::string m = e.what();
    // The check family: a sentence, the call, file:line and CUDA's own name for the error.
    EXPECT_NE(m.find("no usable GPU for this rank"), std::string::npos) << m;
    EXPECT_NE(m.find("failed at "), std::string::npos) << m;
    EXPECT_NE(m.find("device_allocator_cuda.cu:"), std::string::npos) << m;
    EXPECT_NE(m.find("cudaError"), std::string::npos) << m;
  }
#else
  expect_error([] { make_cuda_device_backing(0); }, "built without CUDA");
  expect_error([] { make_cuda_pinned_backing(); }, "built without CUDA");
#endif
}

}  // namespace
}  // namespace dlscale
