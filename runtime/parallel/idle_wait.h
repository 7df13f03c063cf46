// An idle rank's wait for the computing ranks (parallel-auto with the GPUs
// elsewhere) lasts the whole training, so no collective timeout can bound
// it, and with one computing rank no other rank's watchdog watches that one.
// The wait is bounded by what the computing ranks show in their heartbeats
// (heartbeat.h), on the idle rank's own clock (a peer's may differ), from a
// rank's first heartbeat on (the run directory they live in is made after
// start-up's checks):
//   - a computing rank whose heartbeat file has not changed for the limit
//     (collective-timeout) is silent: stopped, killed, its node gone;
//   - a computing rank outside any collective whose work has not advanced
//     (a step, an evaluation batch, a collective) for the limit, or for its
//     activity's own limit (start-up, a checkpoint or model write:
//     checkpoint-timeout; 0 there: no limit), is stuck.
// Inside a collective a computing rank is its peers' watchdogs' to bound.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/parallel/heartbeat.h"

namespace dlscale {

class IdleWaitWatch {
 public:
  // computing: the ranks the idle rank waits for; limit_s <= 0: wait for ever.
  IdleWaitWatch(std::vector<int> computing, double limit_s);
  // beats[r]: rank r's heartbeat of this start (nullopt: none); now: seconds
  // on this host's monotonic clock. Returns what ends the wait, naming the
  // rank, its host and how long ("rank 0 (node1) silent for 31 s, last in
  // ..."), or empty while every computing rank shows life.
  std::string look(const std::vector<std::optional<Heartbeat>>& beats, double now);
  // The host of the silent rank the last look() named (empty: none, or one
  // alive but stuck, whose host a requeue need not avoid).
  const std::string& lost_host() const { return lost_host_; }
  // Whether that rank ran out of its long work's own limit (not limit_s).
  bool lost_in_long_work() const { return lost_in_long_work_; }

 private:
  struct Seen {
    bool beat_seen = false;            // the clocks below run from the first beat
    double beat_time = 0;             // the file's own stamp, only compared for change
    std::int64_t work = -1, seq = -1;  // progress count, last collective's number
    double ended = -1;
    double beat_changed = 0, work_changed = 0;  // on this host's clock
  };
  std::vector<int> computing_;
  std::string lost_host_;
  bool lost_in_long_work_ = false;
  double limit_s_;
  std::vector<Seen> seen_;  // by position in computing_
};

}  // namespace dlscale
