// Bucket planning, gradient views and the overlapped MPI_Iallreduce (or, in
// deterministic mode, the overlapped fixed-order all-reduce).
#include "runtime/parallel/gradient_buckets.h"

#include <algorithm>
#include <chrono>
#include <cstring>

namespace dlscale {

namespace {
MPI_Datatype mpi_type(DType dtype) { return dtype == DType::f64 ? MPI_DOUBLE : MPI_FLOAT; }
}  // namespace

GradientBuckets::GradientBuckets(const std::vector<Param*>& params, Communicator& comm, std::size_t bucket_bytes,
                                 std::size_t first_bucket_bytes)
    : comm_(comm) {
  DLSCALE_REQUIRE(bucket_bytes > 0, "gradient-bucket-size must be positive");
  // Plan: reverse order, close a bucket when the next param would overflow it.
  std::vector<std::vector<Param*>> plan(1);
  std::size_t filled = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    Param* p = *it;
    DLSCALE_REQUIRE(p->grad.dtype() == params.front()->grad.dtype(), "gradient buckets need one element type");
    const std::size_t cap = plan.size() == 1 ? std::min(first_bucket_bytes, bucket_bytes) : bucket_bytes;
    if (!plan.back().empty() && filled + p->grad.bytes() > cap) {
      plan.emplace_back();
      filled = 0;
    }
    plan.back().push_back(p);
    filled += p->grad.bytes();
  }
  for (std::size_t b = 0; b < plan.size() && !plan[b].empty(); ++b) {
    Bucket bucket;
    std::int64_t elements = 0;
    for (Param* p : plan[b]) elements += p->grad.numel();
    bucket.buffer = Tensor({elements}, plan[b].front()->grad.dtype());
    std::int64_t offset = 0;
    for (Param* p : plan[b]) {
      Tensor view = Tensor::view(bucket.buffer, offset, p->grad.shape());
      std::memcpy(view.raw(), p->grad.raw(), p->grad.bytes());
      p->grad = view;  // layers write their gradients straight into the bucket
      offset += p->grad.numel();
      bucket_of_.emplace_back(p, buckets_.size());
    }
    bucket.params = plan[b];
    bucket.pending = plan[b].size();
    buckets_.push_back(std::move(bucket));
  }
  std::sort(bucket_of_.begin(), bucket_of_.end());
  reported_.assign(bucket_of_.size(), 0);
  if (comm_.fixed_order_sums() && comm_.size() > 1) {
    DLSCALE_CHECK_MPI(MPI_Comm_dup(comm_.get(), &fixed_comm_));
    DLSCALE_CHECK_MPI(MPI_Comm_set_errhandler(fixed_comm_, MPI_ERRORS_RETURN));
    for (std::size_t b = 0; b < buckets_.size(); ++b)
      buckets_[b].fixed = std::make_unique<FixedOrderAllreduce>(fixed_comm_, static_cast<int>(2 * b));
  }
}

GradientBuckets::~GradientBuckets() {
  // A step abandoned by an exception can leave all-reduces in flight. MPI
  // allows neither freeing nor cancelling an active collective request, and
  // waiting could block for ever when the exception came from another rank's
  // failure. The error ends the job (MPI_Abort); until then MPI may still
  // write into the buffers, so those of in-flight requests are kept alive.
  // A fixed-order reduction destroyed in flight keeps its own scratch
  // (~FixedOrderAllreduce); its communicator is not freed below.
  bool any = false;
  for (auto& b : buckets_) {
    if (!b.in_flight()) continue;
    any = true;
    abandoned_in_flight().push_back(std::move(b.buffer));
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (fixed_comm_ != MPI_COMM_NULL && !any && !finalized) MPI_Comm_free(&fixed_comm_);
}

std::vector<Tensor>& GradientBuckets::abandoned_in_flight() {
  static std::vector<Tensor>* kept = new std::vector<Tensor>;  // never freed: MPI may write into them until exit
  return *kept;
}

std::vector<std::size_t> GradientBuckets::bucket_sizes_bytes() const {
  std::vector<std::size_t> sizes;
  for (const auto& b : buckets_) sizes.push_back(b.buffer.bytes());
  return sizes;
}

std::string GradientBuckets::plan_signature() const {
  std::string s;
  for (auto bytes : bucket_sizes_bytes()) {
    if (!s.empty()) s += ',';
    s += std::to_string(bytes);
  }
  return s;
}

void GradientBuckets::mark_ready(const std::vector<Param*>& ready) {
  for (Param* p : ready) {
    auto it = std::lower_bound(bucket_of_.begin(), bucket_of_.end(), std::make_pair(p, std::size_t(0)));
    if (it == bucket_of_.end() || it->first != p) continue;  // not a bucketed parameter
    // Counted twice, a bucket would start while another of its gradients is still being written.
    char& reported = reported_[static_cast<std::size_t>(it - bucket_of_.begin())];
    DLSCALE_REQUIRE(!reported, "the gradient of " + p->name + " was reported ready twice in one step");
    reported = 1;
    Bucket& b = buckets_[it->second];
    --b.pending;
  }
  start_ready_buckets();
  poll();
}

void GradientBuckets::start_ready_buckets() {
  // Strictly in plan order, so every rank issues the same collectives in the
  // same order. The last bucket is ready only when backward is over: nothing
  // is left to overlap, so finish() reduces it with the blocking
  // MPI_Allreduce, which Open MPI runs faster than its non-blocking twin.
  while (next_to_start_ + 1 < buckets_.size() && buckets_[next_to_start_].pending == 0)
    start(buckets_[next_to_start_++]);
}

void GradientBuckets::start(Bucket& b) {
  if (comm_.size() == 1) return;
  if (b.fixed) return b.fixed->start(b.buffer);
  DLSCALE_CHECK_MPI(MPI_Iallreduce(MPI_IN_PLACE, b.buffer.raw(), static_cast<int>(b.buffer.numel()),
                                   mpi_type(b.buffer.dtype()), MPI_SUM, comm_.get(), &b.request));
}

bool GradientBuckets::test(Bucket& b) {
  if (b.fixed) return b.fixed->test();
  int done = b.request == MPI_REQUEST_NULL;
  if (!done) DLSCALE_CHECK_MPI(MPI_Test(&b.request, &done, MPI_STATUS_IGNORE));
  return done;
}

void GradientBuckets::poll() {
  // Open MPI advances non-blocking collectives only inside MPI calls.
  // A fixed-order reduction moves to its second round only inside test().
  for (std::size_t i = 0; i < next_to_start_; ++i) test(buckets_[i]);
}

void GradientBuckets::finish() {
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t step_bytes = 0;
  for (std::size_t i = 0; i < buckets_.size(); ++i) {
    Bucket& b = buckets_[i];
    const bool done = i < next_to_start_ && test(b);  // started during backward: completed already?
    if (done || comm_.size() == 1) hidden_bytes_ += b.buffer.bytes();
    total_bytes_ += b.buffer.bytes();
    step_bytes += static_cast<std::int64_t>(b.buffer.bytes());
    b.pending = 0;  // whatever backward did not report is final now
  }
  start_ready_buckets();
  WatchedWait wait(comm_.watchdog(), "the gradient all-reduce", 0, nullptr, step_bytes);
  if (fixed_comm_ != MPI_COMM_NULL) {
    // No blocking variant to prefer: the rest start at once, and every bucket
    // is polled until all are summed, so each moves to its second round as
    // soon as its first is done rather than after the buckets before it.
    for (; next_to_start_ < buckets_.size(); ++next_to_start_) start(buckets_[next_to_start_]);
    for (bool busy = true; busy;) {
      busy = false;
      for (auto& b : buckets_) busy = !test(b) || busy;
    }
  }
  for (auto& b : buckets_)
    if (b.request != MPI_REQUEST_NULL) DLSCALE_CHECK_MPI(MPI_Wait(&b.request, MPI_STATUS_IGNORE));
  for (; next_to_start_ < buckets_.size(); ++next_to_start_) {
    Bucket& b = buckets_[next_to_start_];
    if (comm_.size() > 1)
      DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, b.buffer.raw(), static_cast<int>(b.buffer.numel()),
                                      mpi_type(b.buffer.dtype()), MPI_SUM, comm_.get()));
  }
  for (auto& b : buckets_) b.pending = b.params.size();
  std::fill(reported_.begin(), reported_.end(), 0);
  next_to_start_ = 0;
  exposed_wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace dlscale
