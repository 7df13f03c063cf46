// Stragglers: a rank (or every rank of a node) that computes persistently
// longer than the others, so that every step of a synchronous job waits for
// it. Telemetry feeds one window of per-rank figures at a time (rank 0, in
// the gather it already does); this decides, without MPI or clocks, so it is
// tested on made-up figures.
//
// A rank's compute time is its step time minus the time it was blocked in
// the gradient all-reduce waiting for the others: forward, backward, update
// and waiting for its own data. The others wait for the slowest; rank r's
// excess is its compute time over the median of the other ranks' (with two
// ranks: the other one's), which is what the median rank waits for it each
// step. A rank is slow in a window when its excess is at least
// min_share_of_step of the job's step time and at least min_excess_s: a
// rank that computes 30% longer than the others costs a job whose steps are
// mostly all-reduce next to nothing, and is not worth a report. It is named
// a straggler after `windows` slow windows in a row, and recovered after as
// many windows in a row that are not slow, so noise in one window reports
// nothing either way.
//
// What this does not see: a slow link. In a ring or tree all-reduce every
// rank waits for the slowest link alike, so it shows as all-reduce time on
// every rank (telemetry's step time), not as one rank's compute time. GPU
// ranks that all-reduce with NCCL measure no host-side wait, so their
// compute time is their step time and no straggler is named among them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dlscale {

struct StragglerThresholds {
  double min_share_of_step = 0.10;  // the job waits 10% of its step time for the rank
  double min_excess_s = 0.002;      // and 2 ms per step
  int windows = 3;                 // telemetry windows in a row (each >= 1 s by default)
};
// DLSCALE_STRAGGLER_THRESHOLD=PERCENT:MILLISECONDS:WINDOWS, else the
// defaults above. Throws dlscale::Error for a malformed value.
StragglerThresholds straggler_thresholds_from_environment();

// One rank's figures over a telemetry window, per step.
struct RankWindow {
  int rank = 0;
  std::string host;
  double step_s = 0;     // mean step time
  double compute_s = 0;  // mean step time minus the time blocked waiting for the other ranks
};

// A rank named a straggler, as of the latest window.
struct Straggler {
  int rank = 0;
  std::string host;
  double excess_s = 0;     // per step: compute time over the median of the other ranks'
  double excess_ratio = 0; // excess over that median
  double step_s = 0;       // the job's step time (the longest rank's)
  bool whole_node = false; // every rank of its host is a straggler (and the job has other hosts)
};

// A rank that was a straggler at some point of the run, for summary.json.
struct StragglerReport {
  int rank = 0;
  std::string host;
  bool whole_node = false;   // when first named
  double first_time_s = 0;   // the run's time of the window it was named in
  std::int64_t steps = 0;    // steps of the windows it was a straggler in
  double mean_excess_s = 0;  // per step over those windows: what the job waited for it
  double share_of_step = 0;  // that wait over the job's step time in those windows
  bool recovered = false;    // no longer a straggler at the end of the run
};

// "straggler: rank 3 (node2) computes 41% longer than the median rank; the
// job waits 12.3 ms of each 30.1 ms step for it", or "node node2 (ranks 2, 3)
// ..." for a whole node (the figures of its slowest rank).
std::string straggler_message(const std::vector<Straggler>& of_one_host_or_rank);

class StragglerDetector {
 public:
  explicit StragglerDetector(StragglerThresholds t = {}) : t_(t) {}
  // One window of every rank's figures (any order, one entry per rank);
  // steps: how many steps it covers, time_s: the run's time at its end.
  // Returns the log lines of what changed: ranks (or nodes) newly named,
  // and ranks that recovered.
  std::vector<std::string> observe(const std::vector<RankWindow>& ranks, std::int64_t steps, double time_s);
  // The stragglers as of the latest window, by rank.
  const std::vector<Straggler>& current() const { return current_; }
  // Every rank named during the run, by rank.
  std::vector<StragglerReport> reports() const;

 private:
  struct RankState {
    int slow_run = 0, normal_run = 0;  // windows in a row
    bool flagged = false, ever = false;
    StragglerReport report;
    double excess_sum = 0, step_sum = 0;  // seconds, weighted by steps
  };
  RankState& state_of(int rank);

  StragglerThresholds t_;
  std::vector<std::pair<int, RankState>> states_;  // by rank
  std::vector<Straggler> current_;
};

}  // namespace dlscale
