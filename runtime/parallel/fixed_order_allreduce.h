// A sum over ranks whose floating-point order is fixed by rank numbers only,
// for deterministic mode. MPI_Allreduce leaves the order of the additions to
// the implementation, and Open MPI picks its algorithm (ring, recursive
// doubling, Rabenseifner, HAN's node-aware two levels) by message size, rank
// count and placement on nodes, so the same job placed 1×4 or 2×2 can round
// differently. Here every element's sum is (((x0 + x1) + x2) + ... + x(P-1))
// in rank order, whatever MPI chooses and wherever the ranks run.
//
// How: a reduce-scatter by direct exchange, then an all-gather, both with
// point-to-point messages. The buffer is cut into P chunks (chunk r owned by
// rank r, sizes from the element count and P only). Each rank sends chunk q
// to rank q and receives its own chunk from every peer; once all P pieces are
// there it adds them in rank order and sends the sum to every peer. Each rank
// sends and receives 2(P-1)/P of the buffer, as MPI's ring does, in two
// rounds of messages instead of 2(P-1) dependent ring steps: polled between
// backward's layers, a reduction completes within a few polls, so it still
// overlaps backward. The cost: scratch as large as the buffer (the P pieces
// of one chunk), a rank-order sum pass over it, and P-1 messages per round
// where a ring step has 1.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "runtime/core/tensor.h"

namespace dlscale {

class FixedOrderAllreduce {
 public:
  // comm: its point-to-point messages with `tag` (and tag + 1) belong to this
  // reduction alone; reductions in flight at once need distinct tags.
  FixedOrderAllreduce(MPI_Comm comm, int tag);
  // Destroyed in flight (wait() or test() threw: an MPI error, a peer gone),
  // its receives may still be posted: MPI can yet write into its scratch and
  // the caller's buffer. Both are then kept until the process exits (which
  // follows such an error) instead of freed, so a late message cannot land
  // in memory reused for something else.
  ~FixedOrderAllreduce();
  FixedOrderAllreduce(const FixedOrderAllreduce&) = delete;
  FixedOrderAllreduce& operator=(const FixedOrderAllreduce&) = delete;

  // Starts summing `buffer` (float32 or float64, same size on every rank) in
  // place; the buffer must stay alive and untouched until done.
  void start(Tensor& buffer);
  // Progresses; true when the sum is in the buffer (or nothing is in flight).
  bool test();
  void wait();
  bool active() const { return phase_ != Phase::idle; }

  // Element range [begin, end) of chunk c among `parts` (the rank owning it sums it).
  static std::int64_t chunk_begin(std::int64_t count, int parts, int c) { return count * c / parts; }

 private:
  enum class Phase { idle, scatter, gather };
  void post_scatter();
  void sum_own_chunk();
  void post_gather();
  char* chunk(int c) const;
  std::int64_t chunk_elements(int c) const;

  MPI_Comm comm_;
  int tag_, rank_ = 0, size_ = 1;
  Phase phase_ = Phase::idle;
  Tensor buffer_;  // shares the caller's storage
  std::size_t element_bytes_ = 0;
  MPI_Datatype type_ = MPI_FLOAT;
  std::vector<char> scratch_;  // slot q: rank q's piece of this rank's chunk
  std::vector<MPI_Request> requests_;
};

}  // namespace dlscale
