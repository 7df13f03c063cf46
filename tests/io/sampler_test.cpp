// DistributedSampler and evaluation_batches: the partition property (what
// ranks read together is what one process reads), drop-last, shuffle modes.
#include "io/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "io/io_test_util.h"

namespace dlscale {
namespace {

using Batches = std::vector<std::vector<std::int64_t>>;

TEST(Sampler, RanksTogetherReadExactlyTheSingleProcessBatches) {
  const std::int64_t n = 103, batch = 10;
  for (ShuffleMode mode : {ShuffleMode::once, ShuffleMode::every_epoch, ShuffleMode::never}) {
    for (int epoch : {0, 1, 4}) {
      Batches whole = DistributedSampler(n, batch, 0, 1, mode, 42).epoch_batches(epoch);
      for (int world : {1, 2, 3, 4, 7, 10}) {
        std::vector<Batches> per_rank;
        std::int64_t total_share = 0;
        for (int r = 0; r < world; ++r) {
          DistributedSampler s(n, batch, r, world, mode, 42);
          EXPECT_EQ(s.batches_per_epoch(), 10);
          per_rank.push_back(s.epoch_batches(epoch));
          total_share += s.local_batch_size();
          EXPECT_LE(std::abs(s.local_batch_size() - batch / world), 1);
        }
        EXPECT_EQ(total_share, batch);
        for (std::size_t b = 0; b < whole.size(); ++b) {
          std::vector<std::int64_t> joined;
          for (int r = 0; r < world; ++r) {
            ASSERT_EQ(per_rank[r].size(), whole.size());
            joined.insert(joined.end(), per_rank[r][b].begin(), per_rank[r][b].end());
          }
          EXPECT_EQ(joined, whole[b]) << "world " << world << " batch " << b;
        }
      }
    }
  }
}

TEST(Sampler, EpochHasNoDuplicatesAndDropsTheLastPartialBatch) {
  DistributedSampler s(103, 10, 0, 1, ShuffleMode::every_epoch, 1);
  Batches batches = s.epoch_batches(3);
  ASSERT_EQ(batches.size(), 10u);
  std::set<std::int64_t> seen;
  for (const auto& b : batches) {
    EXPECT_EQ(b.size(), 10u);
    for (auto i : b) {
      EXPECT_TRUE(i >= 0 && i < 103);
      EXPECT_TRUE(seen.insert(i).second) << "sample " << i << " twice";
    }
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(Sampler, ShuffleModes) {
  auto flat = [](const Batches& batches) {
    std::vector<std::int64_t> v;
    for (const auto& b : batches) v.insert(v.end(), b.begin(), b.end());
    return v;
  };
  std::vector<std::int64_t> identity(100);
  std::iota(identity.begin(), identity.end(), std::int64_t{0});

  DistributedSampler every(100, 10, 0, 1, ShuffleMode::every_epoch, 5);
  EXPECT_NE(flat(every.epoch_batches(0)), flat(every.epoch_batches(1)));
  EXPECT_NE(flat(every.epoch_batches(0)), identity);
  EXPECT_EQ(flat(every.epoch_batches(2)),
            flat(DistributedSampler(100, 10, 0, 1, ShuffleMode::every_epoch, 5).epoch_batches(2)));
  EXPECT_NE(flat(every.epoch_batches(0)),
            flat(DistributedSampler(100, 10, 0, 1, ShuffleMode::every_epoch, 6).epoch_batches(0)));

  DistributedSampler once(100, 10, 0, 1, ShuffleMode::once, 5);
  EXPECT_NE(flat(once.epoch_batches(0)), identity);
  EXPECT_EQ(flat(once.epoch_batches(0)), flat(once.epoch_batches(1)));
  EXPECT_EQ(flat(once.epoch_batches(0)), flat(once.epoch_batches(7)));
  EXPECT_EQ(flat(once.epoch_batches(0)), flat(every.epoch_batches(0)));  // once = epoch 0's order

  DistributedSampler never(100, 10, 0, 1, ShuffleMode::never, 5);
  EXPECT_EQ(flat(never.epoch_batches(0)), identity);
  EXPECT_EQ(flat(never.epoch_batches(3)), identity);
}

TEST(Sampler, BadBatchSizesNameTheOption) {
  EXPECT_ERROR_CONTAINS(DistributedSampler(100, 3, 0, 4, ShuffleMode::never, 0), "mini-batch-size 3");
  EXPECT_ERROR_CONTAINS(DistributedSampler(100, 101, 0, 1, ShuffleMode::never, 0), "mini-batch-size 101");
  EXPECT_NO_THROW(DistributedSampler(100, 100, 0, 1, ShuffleMode::never, 0));
  EXPECT_NO_THROW(DistributedSampler(100, 4, 3, 4, ShuffleMode::never, 0));
}

TEST(Sampler, ParseShuffle) {
  EXPECT_EQ(parse_shuffle("once"), ShuffleMode::once);
  EXPECT_EQ(parse_shuffle("every-epoch"), ShuffleMode::every_epoch);
  EXPECT_EQ(parse_shuffle("never"), ShuffleMode::never);
  EXPECT_ERROR_CONTAINS(parse_shuffle("sometimes"), "once, every-epoch or never");
}

TEST(Sampler, EvaluationCoversEverySampleOnce) {
  for (std::int64_t n : {0, 1, 3, 103}) {
    for (int world : {1, 2, 3, 4, 7}) {
      std::vector<std::int64_t> joined;
      for (int r = 0; r < world; ++r) {
        for (const auto& b : evaluation_batches(n, 10, r, world)) {
          EXPECT_FALSE(b.empty());
          EXPECT_LE(b.size(), 10u);
          joined.insert(joined.end(), b.begin(), b.end());
        }
      }
      std::vector<std::int64_t> want(static_cast<std::size_t>(n));
      std::iota(want.begin(), want.end(), std::int64_t{0});
      EXPECT_EQ(joined, want) << "n " << n << " world " << world;
    }
  }
  EXPECT_EQ(evaluation_batches(25, 10, 0, 1).back().size(), 5u);
}

}  // namespace
}  // namespace dlscale
