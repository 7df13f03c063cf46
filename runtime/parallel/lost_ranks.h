// The one line that says whom a waiting job lacks, from every rank's
// heartbeat (runtime/parallel/heartbeat.h): "rank 1 (node2) silent for 31 s,
// last in the gradient all-reduce #5123 at iteration 320; ranks 0, 2, 3 wait
// in the gradient all-reduce #5124". Written by the first rank that sees a
// silent peer, or whose collective wait times out, whichever detector ends
// the job afterwards (Slurm's node timeout, Open MPI's lost connection, the
// watchdog): to stderr, RUN/log.txt and RUN/lost-rank.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/parallel/heartbeat.h"

namespace dlscale {

struct LostRanks {
  std::string line;                      // empty: nobody to name
  std::vector<std::string> silent_hosts; // hosts of the silent ranks, each once
  bool any_silent = false;               // a rank's heartbeat stopped
  bool any_missing = false;              // a rank has no heartbeat of this start (never started, or no run directory yet)
  bool any_behind = false;               // a live rank never entered the collective the others wait in
};

// beats[r]: rank r's heartbeat (nullopt: none readable, or a previous start's); now: wall clock;
// silent_after_s: a heartbeat older than this is silent. name_behind: also
// name live ranks that have not reached the collective the others wait in
// (only once a wait timed out: before, such a rank may just be slow), and
// say so when nobody is silent or behind.
LostRanks name_lost_ranks(const std::vector<std::optional<Heartbeat>>& beats, double now, double silent_after_s,
                          bool name_behind);

// "last in the gradient all-reduce #5123 at iteration 320", "last left ... in
// job setup", "before its first collective".
std::string last_collective_words(const std::optional<CollectiveEntry>& last);

// "rank 3", "ranks 0, 2, 3", "ranks 0-63, 65".
std::string rank_list(const std::vector<int>& ranks);

}  // namespace dlscale
