// Gradient buckets in the manner of PyTorch DDP: parameters are grouped in
// reverse layer order (the order backward produces their gradients) into flat
// buffers, the first at most first_bucket_bytes (1 MiB), the rest at most
// bucket_bytes (25 MiB). Every parameter's grad becomes a view into its
// bucket, so reducing a bucket needs no copies. A bucket's MPI_Iallreduce
// starts as soon as backward has produced all of its gradients; MPI is
// polled between layers so the reduction progresses while backward goes on.
// On a communicator with fixed_order_sums() (deterministic mode) each bucket
// is summed by a FixedOrderAllreduce instead, started and polled the same way.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "runtime/parallel/communicator.h"
#include "runtime/parallel/fixed_order_allreduce.h"

namespace dlscale {

class GradientBuckets {
 public:
  // params in forward order (Network::params()); all of one dtype.
  GradientBuckets(const std::vector<Param*>& params, Communicator& comm, std::size_t bucket_bytes,
                  std::size_t first_bucket_bytes = std::size_t(1) << 20);
  ~GradientBuckets();
  GradientBuckets(const GradientBuckets&) = delete;
  GradientBuckets& operator=(const GradientBuckets&) = delete;

  // Backward has produced the grads of `ready` (one layer's params, maybe
  // none): starts every bucket that is now complete, in plan order, and polls.
  void mark_ready(const std::vector<Param*>& ready);
  // Starts what is left and waits until every bucket is summed over ranks.
  void finish();

  std::size_t bucket_count() const { return buckets_.size(); }
  // Bucket b's params in the order of its flat buffer (reverse layer order):
  // a GPU rank lays out its device gradients the same way (NCCL buckets).
  const std::vector<Param*>& bucket_params(std::size_t b) const { return buckets_[b].params; }
  std::vector<std::size_t> bucket_sizes_bytes() const;
  // "bytes,bytes,..." of the plan: every rank must issue the same collectives.
  std::string plan_signature() const;
  // Seconds spent in finish(): the all-reduce time backward did not hide.
  double exposed_wait_seconds() const { return exposed_wait_s_; }
  // Share of gradient bytes whose all-reduce had already completed when
  // backward ended (finish() was called), over all steps so far.
  double hidden_share() const { return total_bytes_ ? double(hidden_bytes_) / double(total_bytes_) : 0.0; }
  // Buffers of buckets destroyed with their all-reduce still in flight: kept
  // until the process ends, because MPI may still write into them.
  static std::vector<Tensor>& abandoned_in_flight();

 private:
  struct Bucket {
    Tensor buffer;
    std::vector<Param*> params;
    std::size_t pending = 0;  // params of this step whose grads are not ready yet
    MPI_Request request = MPI_REQUEST_NULL;
    std::unique_ptr<FixedOrderAllreduce> fixed;  // deterministic mode's reduction, on fixed_comm_
    bool in_flight() const { return request != MPI_REQUEST_NULL || (fixed && fixed->active()); }
  };
  void start_ready_buckets();
  void poll();
  void start(Bucket& b);
  bool test(Bucket& b);  // progresses; true when b's sum is complete

  // Deterministic mode: a duplicate of comm_'s communicator for the fixed-order
  // reductions' point-to-point messages (tags 2b, 2b + 1 for bucket b).
  MPI_Comm fixed_comm_ = MPI_COMM_NULL;
  Communicator& comm_;
  std::vector<Bucket> buckets_;
  std::vector<std::pair<Param*, std::size_t>> bucket_of_;  // param → bucket index, sorted by pointer
  std::vector<char> reported_;  // per entry of bucket_of_: its gradient was reported this step
  std::size_t next_to_start_ = 0;
  double exposed_wait_s_ = 0;
  std::size_t hidden_bytes_ = 0, total_bytes_ = 0;
};

}  // namespace dlscale
