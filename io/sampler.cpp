// DistributedSampler: one seeded global permutation per epoch, cut into
// global batches, each cut into per-rank slices. Because the cut into global
// batches does not depend on the world size, global batch b holds the same
// samples on 1 rank or on 64.
#include "io/sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "runtime/core/error.h"
#include "runtime/core/rng.h"

namespace dlscale {

ShuffleMode parse_shuffle(const std::string& name) {
  if (name == "once") return ShuffleMode::once;
  if (name == "every-epoch") return ShuffleMode::every_epoch;
  if (name == "never") return ShuffleMode::never;
  fail("unknown shuffle mode '" + name + "' (expected once, every-epoch or never)");
}

std::string shuffle_name(ShuffleMode mode) {
  switch (mode) {
    case ShuffleMode::once: return "once";
    case ShuffleMode::every_epoch: return "every-epoch";
    case ShuffleMode::never: return "never";
  }
  return "unknown";
}

DistributedSampler::DistributedSampler(std::int64_t num_samples, std::int64_t global_batch, int rank, int world,
                                       ShuffleMode shuffle, std::uint64_t seed)
    : num_samples_(num_samples),
      global_batch_(global_batch),
      rank_(rank),
      world_(world),
      shuffle_(shuffle),
      seed_(seed) {
  DLSCALE_REQUIRE(world >= 1 && rank >= 0 && rank < world,
                  "rank " + std::to_string(rank) + " is outside a world of " + std::to_string(world) + " ranks");
  DLSCALE_REQUIRE(num_samples >= 1, "the training set is empty");
  DLSCALE_REQUIRE(global_batch >= world, "mini-batch-size " + std::to_string(global_batch) + " is smaller than the " +
                                             std::to_string(world) +
                                             " ranks computing: every rank needs at least one sample per batch");
  DLSCALE_REQUIRE(global_batch <= num_samples, "mini-batch-size " + std::to_string(global_batch) +
                                                   " is larger than the training set (" + std::to_string(num_samples) +
                                                   " samples)");
}

std::int64_t DistributedSampler::batches_per_epoch() const { return num_samples_ / global_batch_; }

std::int64_t DistributedSampler::local_batch_size() const {
  return (rank_ + 1) * global_batch_ / world_ - rank_ * global_batch_ / world_;
}

namespace {
// splitmix64 finalizer: nearby (seed, epoch) pairs give unrelated streams.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
}  // namespace

std::vector<std::int64_t> DistributedSampler::permutation(int epoch) const {
  std::vector<std::int64_t> perm(static_cast<std::size_t>(num_samples_));
  std::iota(perm.begin(), perm.end(), std::int64_t{0});
  if (shuffle_ == ShuffleMode::never) return perm;
  if (shuffle_ == ShuffleMode::once) epoch = 0;
  Rng rng(mix(seed_ ^ mix(static_cast<std::uint64_t>(epoch))));
  // Fisher-Yates with Rng::below, so the order is the same on every machine.
  for (std::size_t i = perm.size() - 1; i > 0; --i) {
    auto j = static_cast<std::size_t>(rng.below(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::vector<std::vector<std::int64_t>> DistributedSampler::epoch_batches(int epoch) const {
  std::vector<std::int64_t> perm = permutation(epoch);
  const std::int64_t begin = rank_ * global_batch_ / world_;
  const std::int64_t end = (rank_ + 1) * global_batch_ / world_;
  std::vector<std::vector<std::int64_t>> batches(static_cast<std::size_t>(batches_per_epoch()));
  for (std::size_t b = 0; b < batches.size(); ++b) {
    auto first = perm.begin() + static_cast<std::ptrdiff_t>(static_cast<std::int64_t>(b) * global_batch_);
    batches[b].assign(first + begin, first + end);
  }
  return batches;
}

std::vector<std::vector<std::int64_t>> evaluation_batches(std::int64_t num_samples, std::int64_t batch_size, int rank,
                                                          int world) {
  DLSCALE_REQUIRE(world >= 1 && rank >= 0 && rank < world,
                  "rank " + std::to_string(rank) + " is outside a world of " + std::to_string(world) + " ranks");
  DLSCALE_REQUIRE(batch_size >= 1, "the evaluation batch size must be at least 1");
  DLSCALE_REQUIRE(num_samples >= 0, "negative number of samples");
  const std::int64_t begin = rank * num_samples / world;
  const std::int64_t end = (rank + 1) * num_samples / world;
  std::vector<std::vector<std::int64_t>> batches;
  for (std::int64_t first = begin; first < end; first += batch_size) {
    std::vector<std::int64_t>& batch = batches.emplace_back();
    for (std::int64_t i = first; i < std::min(end, first + batch_size); ++i) batch.push_back(i);
  }
  return batches;
}

}  // namespace dlscale
