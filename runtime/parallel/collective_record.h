// What a rank did in its last collectives, as PyTorch's NCCL flight recorder
// keeps it: a ring of the last few hundred, each with its sequence number.
// Every rank of a communicator runs the same collectives in the same order,
// so equal numbers on two ranks are the same collective: when a job stops
// answering, the rank that never entered #N is the one the others wait for.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace dlscale {

struct CollectiveEntry {
  std::int64_t seq = 0;         // 1, 2, ... in the order this rank entered its collectives
  std::string kind;             // the watchdog's words: "an all-reduce of metrics"
  std::int64_t bytes = 0;       // this rank's payload (0: not known)
  std::int64_t iteration = -1;  // the iteration it belongs to; -1: before training
  double started = 0;           // wall clock, seconds since the epoch (comparable across hosts)
  double ended = 0;             // 0: still in it
};

// Written by the thread that runs the collectives, read by the heartbeat and
// watchdog threads: a mutex, taken once per collective (microseconds beside
// any MPI call).
class CollectiveRecord {
 public:
  explicit CollectiveRecord(std::size_t capacity = 512);
  void begin(const char* kind, std::int64_t bytes);
  void end();
  void set_iteration(std::int64_t iteration);

  // Oldest first, at most capacity entries.
  std::vector<CollectiveEntry> entries() const;
  // The collective entered last (ended or not); none before the first.
  std::optional<CollectiveEntry> last() const;

 private:
  mutable std::mutex mutex_;
  std::vector<CollectiveEntry> ring_;
  std::int64_t next_seq_ = 1;
  std::int64_t iteration_ = -1;
};

// Seconds since the epoch, the clock of every record and heartbeat.
double wall_seconds();

}  // namespace dlscale
