// Which samples each rank reads: PyTorch DistributedSampler semantics with
// drop-last over a seeded global permutation, arranged so that global batch b
// holds the same samples whatever the number of ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlscale {

enum class ShuffleMode { once, every_epoch, never };
ShuffleMode parse_shuffle(const std::string& name);  // "once" | "every-epoch" | "never"
std::string shuffle_name(ShuffleMode mode);          // its inverse

class DistributedSampler {
 public:
  // global_batch samples per iteration over all ranks; rank r takes the
  // contiguous slice [r*B/W, (r+1)*B/W) of each global batch.
  DistributedSampler(std::int64_t num_samples, std::int64_t global_batch, int rank, int world, ShuffleMode shuffle,
                     std::uint64_t seed);
  // floor(num_samples / global_batch): the last partial batch is dropped on every rank.
  std::int64_t batches_per_epoch() const;
  // This rank's sample indices of every batch of `epoch`, in order.
  std::vector<std::vector<std::int64_t>> epoch_batches(int epoch) const;
  std::int64_t local_batch_size() const;  // this rank's share of one global batch

 private:
  std::vector<std::int64_t> permutation(int epoch) const;
  std::int64_t num_samples_, global_batch_;
  int rank_, world_;
  ShuffleMode shuffle_;
  std::uint64_t seed_;
};

// Evaluation split: every sample exactly once, rank r taking the contiguous
// range [r*N/W, (r+1)*N/W), in batches of at most batch_size.
std::vector<std::vector<std::int64_t>> evaluation_batches(std::int64_t num_samples, std::int64_t batch_size, int rank,
                                                           int world);

}  // namespace dlscale
