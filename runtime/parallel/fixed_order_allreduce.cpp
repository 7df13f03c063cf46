// The fixed-order sum: direct-exchange reduce-scatter, rank-order sum of each
// chunk, all-gather. See the header for why this shape.
#include "runtime/parallel/fixed_order_allreduce.h"

#include <climits>
#include <cstring>
#include <mutex>

namespace dlscale {

FixedOrderAllreduce::~FixedOrderAllreduce() {
  if (phase_ == Phase::idle) return;
  // Reachable until exit, so no leak checker calls it one; never freed.
  struct Kept {
    std::mutex mutex;
    std::vector<std::vector<char>> scratch;
    std::vector<Tensor> buffers;
  };
  static Kept* kept = new Kept;
  std::lock_guard<std::mutex> lock(kept->mutex);
  kept->scratch.push_back(std::move(scratch_));
  kept->buffers.push_back(buffer_);
}

FixedOrderAllreduce::FixedOrderAllreduce(MPI_Comm comm, int tag) : comm_(comm), tag_(tag) {
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm_, &size_));
}

char* FixedOrderAllreduce::chunk(int c) const {
  return static_cast<char*>(const_cast<void*>(buffer_.raw())) +
         chunk_begin(buffer_.numel(), size_, c) * static_cast<std::int64_t>(element_bytes_);
}

std::int64_t FixedOrderAllreduce::chunk_elements(int c) const {
  return chunk_begin(buffer_.numel(), size_, c + 1) - chunk_begin(buffer_.numel(), size_, c);
}

void FixedOrderAllreduce::start(Tensor& buffer) {
  DLSCALE_REQUIRE(!active(), "a fixed-order all-reduce was started while its previous one is still in flight");
  buffer_ = buffer;
  element_bytes_ = size_of(buffer.dtype());
  type_ = buffer.dtype() == DType::f64 ? MPI_DOUBLE : MPI_FLOAT;
  DLSCALE_REQUIRE(buffer.numel() / size_ < INT_MAX, "a fixed-order all-reduce chunk exceeds MPI's int count");
  if (size_ == 1) return;
  post_scatter();
}

// Round 1: chunk q of this rank's buffer goes to rank q; slot q of the scratch
// receives rank q's piece of this rank's chunk. Empty chunks (fewer elements
// than ranks) send nothing; both sides compute the same sizes.
void FixedOrderAllreduce::post_scatter() {
  const std::int64_t mine = chunk_elements(rank_);
  const std::size_t slot = static_cast<std::size_t>(mine) * element_bytes_;
  scratch_.resize(slot * static_cast<std::size_t>(size_));
  requests_.clear();
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    if (mine > 0) {
      requests_.emplace_back();
      DLSCALE_CHECK_MPI(MPI_Irecv(scratch_.data() + slot * q, static_cast<int>(mine), type_, q, tag_, comm_,
                                  &requests_.back()));
    }
    if (const std::int64_t theirs = chunk_elements(q); theirs > 0) {
      requests_.emplace_back();
      DLSCALE_CHECK_MPI(MPI_Isend(chunk(q), static_cast<int>(theirs), type_, q, tag_, comm_,
                                  &requests_.back()));
    }
  }
  phase_ = Phase::scatter;
}

// (((x0 + x1) + x2) + ...) for every element, accumulated in slot 0's
// storage rank by rank (vectorizes; IEEE addition is commutative, so how the
// compiler orders the two operands of one addition does not matter).
void FixedOrderAllreduce::sum_own_chunk() {
  const std::int64_t n = chunk_elements(rank_);
  if (n == 0) return;
  const std::size_t slot = static_cast<std::size_t>(n) * element_bytes_;
  std::memcpy(scratch_.data() + slot * rank_, chunk(rank_), slot);
  dispatch(buffer_.dtype(), [&]<class T>() {
    T* acc = reinterpret_cast<T*>(scratch_.data());
    for (int q = 1; q < size_; ++q) {
      const T* piece = reinterpret_cast<const T*>(scratch_.data() + slot * q);
      for (std::int64_t i = 0; i < n; ++i) acc[i] += piece[i];
    }
  });
  std::memcpy(chunk(rank_), scratch_.data(), slot);
}

// Round 2: this rank's summed chunk to every peer, their chunks into place.
void FixedOrderAllreduce::post_gather() {
  requests_.clear();
  const std::int64_t mine = chunk_elements(rank_);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    if (const std::int64_t theirs = chunk_elements(q); theirs > 0) {
      requests_.emplace_back();
      DLSCALE_CHECK_MPI(MPI_Irecv(chunk(q), static_cast<int>(theirs), type_, q, tag_ + 1, comm_,
                                  &requests_.back()));
    }
    if (mine > 0) {
      requests_.emplace_back();
      DLSCALE_CHECK_MPI(MPI_Isend(chunk(rank_), static_cast<int>(mine), type_, q, tag_ + 1,
                                  comm_, &requests_.back()));
    }
  }
  phase_ = Phase::gather;
}

bool FixedOrderAllreduce::test() {
  while (phase_ != Phase::idle) {
    int done = 0;
    DLSCALE_CHECK_MPI(
        MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done, MPI_STATUSES_IGNORE));
    if (!done) return false;
    // Round 1's sends read chunks round 2 receives into: it starts only after they completed.
    if (phase_ == Phase::scatter) {
      sum_own_chunk();
      post_gather();
    } else {
      requests_.clear();
      phase_ = Phase::idle;
    }
  }
  return true;
}

void FixedOrderAllreduce::wait() {
  while (phase_ != Phase::idle) {
    DLSCALE_CHECK_MPI(MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE));
    test();
  }
}

}  // namespace dlscale
