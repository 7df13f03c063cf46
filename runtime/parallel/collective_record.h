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

// Work outside collectives, for idle ranks that wait on the computing ranks
// (runtime/parallel/idle_wait.h): a lone computing rank runs no collective
// at all, so a step, an evaluation batch or a checkpoint write must show
// that it advances.
struct WorkProgress {
  std::int64_t count = 0;    // bumped by each step (set_iteration) and note_progress()
  std::string activity;      // a long piece of work under way ("writing a checkpoint"), or empty
  double activity_limit = 0; // how long it may take (s); 0: none given
};

// Written by the thread that runs the collectives, read by the heartbeat and
// watchdog threads: a mutex, taken once per collective (microseconds beside
// any MPI call).
class CollectiveRecord {
 public:
  explicit CollectiveRecord(std::size_t capacity = 512);
  void begin(const char* kind, std::int64_t bytes);
  void end();
  void set_iteration(std::int64_t iteration);  // also counts as progress
  void note_progress();
  // Names long work until the next call (nullptr: none). what must outlive it (a literal).
  void set_activity(const char* what, double limit_s);
  WorkProgress progress() const;

  // Oldest first, at most capacity entries.
  std::vector<CollectiveEntry> entries() const;
  // The collective entered last (ended or not); none before the first.
  std::optional<CollectiveEntry> last() const;

 private:
  mutable std::mutex mutex_;
  std::vector<CollectiveEntry> ring_;
  std::int64_t next_seq_ = 1;
  std::int64_t iteration_ = -1;
  std::int64_t progress_ = 0;
  const char* activity_ = nullptr;
  double activity_limit_ = 0;
};

// Seconds since the epoch, the clock of every record and heartbeat.
double wall_seconds();

}  // namespace dlscale
