// Straggler detection over telemetry windows (see stragglers.h).
#include "runtime/monitoring/stragglers.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>

#include "runtime/core/error.h"

namespace dlscale {

namespace {

// The median of `sorted` without its element at `skip`.
double median_without(const std::vector<double>& sorted, std::size_t skip) {
  const std::size_t m = sorted.size() - 1;
  auto at = [&](std::size_t i) { return sorted[i < skip ? i : i + 1]; };
  return m % 2 ? at(m / 2) : (at(m / 2 - 1) + at(m / 2)) / 2;
}

std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", s * 1000);
  return buf;
}

}  // namespace

StragglerThresholds straggler_thresholds_from_environment() {
  StragglerThresholds t;
  const char* v = std::getenv("DLSCALE_STRAGGLER_THRESHOLD");
  if (!v || !*v) return t;
  double percent = 0, millis = 0;
  int windows = 0, used = 0;
  if (std::sscanf(v, "%lf:%lf:%d%n", &percent, &millis, &windows, &used) != 3 || v[used] != '\0' ||
      !(percent >= 0) || !(millis >= 0) || windows < 1)
    fail("DLSCALE_STRAGGLER_THRESHOLD=" + std::string(v) +
         " is not PERCENT:MILLISECONDS:WINDOWS (e.g. 10:2:3: the job waits at least 10% of each step and 2 ms for "
         "a rank, in 3 telemetry windows in a row)");
  t.min_share_of_step = percent / 100, t.min_excess_s = millis / 1000, t.windows = windows;
  return t;
}

std::string straggler_message(const std::vector<Straggler>& group) {
  DLSCALE_REQUIRE(!group.empty(), "a straggler message needs a straggler");
  const Straggler* worst = &group.front();
  for (const auto& s : group)
    if (s.excess_s > worst->excess_s) worst = &s;
  std::string who;
  if (group.front().whole_node) {
    who = "node " + group.front().host + " (rank" + (group.size() > 1 ? "s " : " ");
    for (std::size_t i = 0; i < group.size(); ++i) who += (i ? ", " : "") + std::to_string(group[i].rank);
    who += ")";
  } else {
    who = "rank " + std::to_string(worst->rank) + " (" + (worst->host.empty() ? "unknown host" : worst->host) + ")";
  }
  char pct[32];
  std::snprintf(pct, sizeof pct, "%.0f%%", worst->excess_ratio * 100);
  return "straggler: " + who + " computes " + pct + " longer than the median rank; the job waits " +
         ms(worst->excess_s) + " of each " + ms(worst->step_s) + " step for it";
}

StragglerDetector::RankState& StragglerDetector::state_of(int rank) {
  auto it = std::lower_bound(states_.begin(), states_.end(), rank,
                             [](const auto& entry, int r) { return entry.first < r; });
  if (it == states_.end() || it->first != rank) it = states_.insert(it, {rank, RankState{}});
  return it->second;
}

std::vector<std::string> StragglerDetector::observe(const std::vector<RankWindow>& ranks, std::int64_t steps,
                                                    double time_s) {
  current_.clear();
  if (ranks.size() < 2 || steps <= 0) return {};
  // The job's step is the longest: every rank's lasts about as long (they
  // wait for each other), but each is timed from its own previous step's
  // end, so a straggler's step can read a little longer than the others'.
  std::vector<double> computes;
  double job_step = 0;
  for (const auto& r : ranks) computes.push_back(r.compute_s), job_step = std::max(job_step, r.step_s);
  std::sort(computes.begin(), computes.end());
  std::map<std::string, int> ranks_on_host;
  for (const auto& r : ranks) ++ranks_on_host[r.host];

  std::vector<std::string> lines;
  std::vector<Straggler> named;  // newly named in this window
  for (const auto& r : ranks) {
    const auto at = std::lower_bound(computes.begin(), computes.end(), r.compute_s) - computes.begin();
    const double baseline = median_without(computes, static_cast<std::size_t>(at));
    const double excess = r.compute_s - baseline;
    const bool slow = excess >= t_.min_excess_s && excess >= t_.min_share_of_step * job_step;
    RankState& st = state_of(r.rank);
    st.slow_run = slow ? st.slow_run + 1 : 0;
    st.normal_run = slow ? 0 : st.normal_run + 1;
    const Straggler s{r.rank, r.host, std::max(excess, 0.0), baseline > 0 ? std::max(excess, 0.0) / baseline : 0,
                      job_step, false};
    if (!st.flagged && st.slow_run >= t_.windows) {
      st.flagged = true;
      named.push_back(s);
      if (!st.ever) st.report = {r.rank, r.host, false, time_s, 0, 0, 0, false};
      st.ever = true;
    } else if (st.flagged && st.normal_run >= t_.windows) {
      st.flagged = false;
      lines.push_back("dlscale: straggler recovered: rank " + std::to_string(r.rank) + " (" + r.host +
                      ") computes within the thresholds of the median rank again");
    }
    if (!st.flagged) continue;
    st.excess_sum += s.excess_s * static_cast<double>(steps), st.step_sum += job_step * static_cast<double>(steps);
    st.report.steps += steps;
    current_.push_back(s);
  }
  // A node is the straggler when all its ranks are, and the job has other nodes.
  std::map<std::string, int> flagged_on_host;
  for (const auto& s : current_) ++flagged_on_host[s.host];
  for (auto& s : current_) s.whole_node = ranks_on_host.size() > 1 && flagged_on_host[s.host] == ranks_on_host[s.host];
  std::sort(current_.begin(), current_.end(), [](const auto& a, const auto& b) { return a.rank < b.rank; });
  std::map<std::string, std::vector<Straggler>> node_groups;  // hosts with a newly named rank that are whole nodes
  for (const auto& n : named) {
    RankState& st = state_of(n.rank);
    const auto it = std::find_if(current_.begin(), current_.end(), [&](const auto& c) { return c.rank == n.rank; });
    st.report.whole_node = it->whole_node;
    if (!it->whole_node) {
      lines.push_back("dlscale: " + straggler_message({*it}));
    } else if (!node_groups.count(n.host)) {
      for (const auto& c : current_)
        if (c.host == n.host) node_groups[n.host].push_back(c);
    }
  }
  for (const auto& [host, group] : node_groups) lines.push_back("dlscale: " + straggler_message(group));
  return lines;
}

std::vector<StragglerReport> StragglerDetector::reports() const {
  std::vector<StragglerReport> out;
  for (const auto& [rank, st] : states_) {
    if (!st.ever) continue;
    StragglerReport r = st.report;
    r.mean_excess_s = r.steps > 0 ? st.excess_sum / static_cast<double>(r.steps) : 0;
    r.share_of_step = st.step_sum > 0 ? st.excess_sum / st.step_sum : 0;
    r.recovered = !st.flagged;
    out.push_back(r);
  }
  return out;
}

}  // namespace dlscale
