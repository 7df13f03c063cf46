// MPI collectives on tensors and strings.
#include "runtime/parallel/communicator.h"

#include <chrono>
#include <thread>

#include "runtime/parallel/fixed_order_allreduce.h"

namespace dlscale {

namespace {
MPI_Datatype mpi_type(DType dtype) { return dtype == DType::f64 ? MPI_DOUBLE : MPI_FLOAT; }
// The point-to-point messages on comm_ are those of a blocking fixed-order
// tensor sum (tags 1 and 2: FixedOrderAllreduce uses tag and tag + 1) and
// telemetry's link probe (link_probe.cpp, tag 100); GradientBuckets uses a
// communicator of its own.
constexpr int kTensorSumTag = 1;
}  // namespace

Communicator::Communicator(MPI_Comm parent) {
  DLSCALE_CHECK_MPI(MPI_Comm_dup(parent, &comm_));
  // Errors come back as codes so check_mpi can turn them into dlscale::Error.
  DLSCALE_CHECK_MPI(MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN));
  DLSCALE_CHECK_MPI(MPI_Comm_rank(comm_, &rank_));
  DLSCALE_CHECK_MPI(MPI_Comm_size(comm_, &size_));
  MPI_Comm node = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  DLSCALE_CHECK_MPI(MPI_Comm_rank(node, &local_rank_));
  DLSCALE_CHECK_MPI(MPI_Comm_size(node, &local_size_));
  MPI_Comm_free(&node);
}

std::unique_ptr<Communicator> Communicator::split(bool member) const {
  // The split and the new communicator's own setup (dup, node split) are collectives too.
  WatchedWait wait(watchdog_, "splitting the communicator into computing and idle ranks");
  MPI_Comm part = MPI_COMM_NULL;
  DLSCALE_CHECK_MPI(MPI_Comm_split(comm_, member ? 0 : MPI_UNDEFINED, rank_, &part));
  if (part == MPI_COMM_NULL) return nullptr;
  auto out = std::make_unique<Communicator>(part);
  MPI_Comm_free(&part);
  out->set_watchdog(watchdog_);
  return out;
}

Communicator::~Communicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

void Communicator::allreduce_sum(double* values, int count) {
  if (size_ == 1) return;
  WatchedWait wait(watchdog_, "an all-reduce of metrics", 0, nullptr, std::int64_t{8} * count);
  if (!fixed_order_sums_) {
    DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_DOUBLE, MPI_SUM, comm_));
    return;
  }
  // A handful of values: every rank gathers all of them and adds in rank order.
  std::vector<double> all(static_cast<std::size_t>(count) * size_);
  DLSCALE_CHECK_MPI(MPI_Allgather(values, count, MPI_DOUBLE, all.data(), count, MPI_DOUBLE, comm_));
  for (int k = 0; k < count; ++k) {
    double sum = all[k];
    for (int r = 1; r < size_; ++r) sum += all[static_cast<std::size_t>(r) * count + k];
    values[k] = sum;
  }
}

void Communicator::allreduce_sum(Tensor& t) {
  if (size_ == 1) return;
  WatchedWait wait(watchdog_, "a tensor all-reduce", 0, nullptr, static_cast<std::int64_t>(t.bytes()));
  if (fixed_order_sums_) {
    FixedOrderAllreduce sum(comm_, kTensorSumTag);
    sum.start(t);
    sum.wait();
    return;
  }
  DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, t.raw(), static_cast<int>(t.numel()), mpi_type(t.dtype()), MPI_SUM,
                                  comm_));
}

double Communicator::allreduce_max(double value) {
  if (size_ == 1) return value;
  WatchedWait wait(watchdog_, "the step-boundary agreement (stop and checkpoint decisions)", 0, nullptr, 8);
  DLSCALE_CHECK_MPI(MPI_Allreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, comm_));
  return value;
}

void Communicator::broadcast(Tensor& t, int root) {
  if (size_ == 1) return;
  WatchedWait wait(watchdog_, "a broadcast from rank 0", 0, nullptr, static_cast<std::int64_t>(t.bytes()));
  DLSCALE_CHECK_MPI(MPI_Bcast(t.raw(), static_cast<int>(t.numel()), mpi_type(t.dtype()), root, comm_));
}

void Communicator::broadcast(std::string& text, int root) {
  if (size_ == 1) return;
  long long n = static_cast<long long>(text.size());
  WatchedWait wait(watchdog_, "a broadcast from rank 0");
  DLSCALE_CHECK_MPI(MPI_Bcast(&n, 1, MPI_LONG_LONG, root, comm_));
  text.resize(static_cast<std::size_t>(n));
  DLSCALE_CHECK_MPI(MPI_Bcast(text.data(), static_cast<int>(n), MPI_CHAR, root, comm_));
}

std::vector<std::string> Communicator::allgather(const std::string& text) {
  if (size_ == 1) return {text};
  int n = static_cast<int>(text.size());
  std::vector<int> sizes(size_), offsets(size_);
  WatchedWait wait(watchdog_, "an allgather", 0, nullptr, n);
  DLSCALE_CHECK_MPI(MPI_Allgather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, comm_));
  int total = 0;
  for (int r = 0; r < size_; ++r) offsets[r] = total, total += sizes[r];
  std::string all(total, '\0');
  DLSCALE_CHECK_MPI(MPI_Allgatherv(text.data(), n, MPI_CHAR, all.data(), sizes.data(), offsets.data(), MPI_CHAR, comm_));
  std::vector<std::string> out;
  for (int r = 0; r < size_; ++r) out.push_back(all.substr(offsets[r], sizes[r]));
  return out;
}

std::vector<double> Communicator::gather(const double* values, int count, int root) {
  std::vector<double> all(rank_ == root ? static_cast<std::size_t>(count) * size_ : 0);
  if (size_ == 1) return std::vector<double>(values, values + count);
  WatchedWait wait(watchdog_, "a gather of telemetry samples", 0, nullptr, std::int64_t{8} * count);
  DLSCALE_CHECK_MPI(MPI_Gather(values, count, MPI_DOUBLE, all.data(), count, MPI_DOUBLE, root, comm_));
  return all;
}

void Communicator::barrier(const char* what, double timeout_s, const char* limit_name) {
  WatchedWait wait(watchdog_, what, timeout_s, limit_name);
  DLSCALE_CHECK_MPI(MPI_Barrier(comm_));
}

void Communicator::barrier_polled(double poll_s, const std::function<void()>& look) {
  MPI_Request request = MPI_REQUEST_NULL;
  WatchedWait wait(watchdog_, "a barrier");
  DLSCALE_CHECK_MPI(MPI_Ibarrier(comm_, &request));
  auto next_look = std::chrono::steady_clock::now();
  for (int done = 0;;) {
    DLSCALE_CHECK_MPI(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done) return;
    if (look && std::chrono::steady_clock::now() >= next_look) {
      look();  // it may end the wait by exiting or throwing; the barrier stays posted
      next_look = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(poll_s));
  }
}

}  // namespace dlscale
