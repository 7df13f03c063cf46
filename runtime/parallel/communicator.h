// The MPI communicator a training job uses: a duplicate of the parent
// communicator (so dlscale's messages never mix with the caller's), passed
// explicitly, never global.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/core/tensor.h"
#include "runtime/parallel/watchdog.h"

namespace dlscale {

class Communicator {
 public:
  explicit Communicator(MPI_Comm parent = MPI_COMM_WORLD);
  // Collective: the ranks with member=true form a new communicator (returned
  // to them); the others get nullptr.
  std::unique_ptr<Communicator> split(bool member) const;
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  // Ranks on this node and this rank's index among them.
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  MPI_Comm get() const { return comm_; }

  // Sums over ranks. With fixed_order_sums() each element is the rank-order
  // sum (((x0 + x1) + x2) + ...), whatever algorithm MPI would pick.
  void allreduce_sum(double* values, int count);
  void allreduce_sum(Tensor& t);  // in place, float32 or float64
  double allreduce_max(double value);
  void broadcast(Tensor& t, int root = 0);
  void broadcast(std::string& text, int root = 0);
  // Every rank's string, on every rank (hosts, device names).
  std::vector<std::string> allgather(const std::string& text);
  // Every rank's `count` values, in rank order, on root (empty elsewhere): telemetry samples.
  std::vector<double> gather(const double* values, int count, int root = 0);
  // what names the wait in the watchdog's message; timeout_s > 0 bounds it
  // instead of the watchdog's own timeout (a wait known to be long), and
  // limit_name names the option that set it.
  void barrier(const char* what = "a barrier", double timeout_s = 0, const char* limit_name = nullptr);
  // A barrier that sleeps poll_s between tests instead of spinning: for ranks
  // that wait a long time for others (idle ranks while the others train).
  // look runs about once a second while it waits; it ends the wait by throwing.
  void barrier_polled(double poll_s, const std::function<void()>& look = {});
  // Work outside collectives advanced (an evaluation batch): for idle ranks
  // watching a lone computing rank (runtime/parallel/idle_wait.h).
  void note_progress() {
    if (watchdog_) watchdog_->note_progress();
  }

  // Every collective below runs under this watchdog's bounded wait (none: unbounded).
  void set_watchdog(CollectiveWatchdog* dog) { watchdog_ = dog; }
  CollectiveWatchdog* watchdog() const { return watchdog_; }
  // Deterministic mode: every floating-point sum over this communicator
  // (these sums and GradientBuckets built on it) is fixed-order, so results do
  // not depend on MPI's choice of algorithm or on how ranks sit on nodes.
  void set_fixed_order_sums(bool on) { fixed_order_sums_ = on; }
  bool fixed_order_sums() const { return fixed_order_sums_; }

 private:
  CollectiveWatchdog* watchdog_ = nullptr;
  bool fixed_order_sums_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0, local_size_ = 1;
};

}  // namespace dlscale
