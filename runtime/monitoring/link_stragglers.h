// Link stragglers: a host whose network link is slow, so that every rank
// waits in each step's all-reduce (stragglers.h names ranks that compute
// slowly; a slow link shows on every rank alike and is not one of them).
// Telemetry probes rank 0's link to every other host once per line
// (runtime/parallel/link_probe.h) and feeds this detector, which decides
// without MPI or clocks, so it is tested on made-up figures.
//
// A probe is slow when it takes at least twice the window's fastest probe
// (either direction, any host). Its cost to the job: a ring all-reduce moves
// 2 (n - 1) / n of the gradient bytes over every rank's link each step, so
// the link costs its extra time per probe (over the fastest) for that many
// bytes, and at most the median rank's all-reduce wait (step time − compute
// time). A host is slow in a window when that cost passes the compute
// stragglers' thresholds (share of the step, milliseconds); it is named
// after that many windows in a row and recovered after as many that are not.
// When every download from rank 0's host is slow against the fastest upload
// (two or more probed hosts), the end they share is named: rank 0's host,
// by the fastest of those downloads; otherwise each probed host is judged by
// its slower direction. A link slow only into rank 0's host makes every
// upload slow, and names every other host. With two hosts there is no faster
// link to compare with, so a slow link between them is not named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/monitoring/stragglers.h"

namespace dlscale {

// One probed host's times in a window (link_probe.h's LinkTimes, by host).
struct LinkWindow {
  std::string host;
  double upload_s = 0, download_s = 0;
};

struct LinkStraggler {
  std::string host;        // whose link is slow
  std::vector<int> ranks;  // the job's ranks on it
  double cost_s = 0;       // per step: what the job waits for the link
  double step_s = 0;       // the job's step time
  double probe_s = 0;      // its probe (the slower direction; for rank 0's host the slowest download)
  double fastest_probe_s = 0;
};

struct LinkStragglerReport {
  std::string host;
  std::vector<int> ranks;
  double first_time_s = 0;  // the run's time of the window it was named in
  std::int64_t steps = 0;   // steps of the windows it was slow in
  double mean_cost_s = 0;   // per step over those windows
  double share_of_step = 0; // that cost over the job's step time
  bool recovered = false;   // not slow at the end of the run
};

// "link straggler: ranks 2, 3 (node2): its link costs the job 14.0 ms of each
// 52.0 ms step (a 256 KiB probe to node1 takes 10.5 ms, the fastest link 0.4 ms)"
std::string link_straggler_message(const LinkStraggler& s, const std::string& rank0_host, std::size_t probe_bytes);

class LinkStragglerDetector {
 public:
  LinkStragglerDetector(StragglerThresholds t, std::size_t probe_bytes) : t_(t), probe_bytes_(probe_bytes) {}
  // Bytes each rank all-reduces per step (the gradients); 0: not known, nothing is named.
  void set_reduce_bytes(std::int64_t bytes) { reduce_bytes_ = bytes; }
  // links: this window's probes; ranks: every rank's figures (its host's ranks
  // and the all-reduce wait come from them); steps, time_s as for
  // StragglerDetector::observe. Returns the log lines of what changed.
  std::vector<std::string> observe(const std::vector<LinkWindow>& links, const std::vector<RankWindow>& ranks,
                                   std::int64_t steps, double time_s);
  const std::vector<LinkStraggler>& current() const { return current_; }
  std::vector<LinkStragglerReport> reports() const;

 private:
  struct HostState {
    int slow_run = 0, normal_run = 0;
    bool flagged = false, ever = false;
    LinkStragglerReport report;
    double cost_sum = 0, step_sum = 0;
  };
  StragglerThresholds t_;
  std::size_t probe_bytes_;
  std::int64_t reduce_bytes_ = 0;
  std::vector<std::pair<std::string, HostState>> states_;  // in the order first seen
  std::vector<LinkStraggler> current_;
};

}  // namespace dlscale
