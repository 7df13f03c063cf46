// Link straggler detection over telemetry windows (see link_stragglers.h).
#include "runtime/monitoring/link_stragglers.h"

#include <algorithm>
#include <cstdio>
#include <map>

#include "runtime/parallel/lost_ranks.h"

namespace dlscale {

namespace {
std::string ms(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", s * 1000);
  return buf;
}
std::string size_text(std::size_t bytes) {
  return bytes % 1024 == 0 ? std::to_string(bytes / 1024) + " KiB" : std::to_string(bytes) + " bytes";
}
}  // namespace

std::string link_straggler_message(const LinkStraggler& s, const std::string& rank0_host, std::size_t probe_bytes) {
  const std::string probe = s.host == rank0_host ? "a " + size_text(probe_bytes) + " probe from it"
                                                 : "a " + size_text(probe_bytes) + " probe to " + rank0_host;
  return "link straggler: " + rank_list(s.ranks) + " (" + s.host + "): its link costs the job " + ms(s.cost_s) +
         " of each " + ms(s.step_s) + " step (" + probe + " takes " + ms(s.probe_s) + ", the fastest link " +
         ms(s.fastest_probe_s) + ")";
}

std::vector<std::string> LinkStragglerDetector::observe(const std::vector<LinkWindow>& links,
                                                        const std::vector<RankWindow>& ranks, std::int64_t steps,
                                                        double time_s) {
  current_.clear();
  if (links.size() < 2 || ranks.empty() || steps <= 0) return {};
  std::map<std::string, std::vector<int>> ranks_on;
  double job_step = 0;
  std::vector<double> waits;
  const RankWindow* first = &ranks.front();
  for (const auto& r : ranks) {
    ranks_on[r.host].push_back(r.rank);
    job_step = std::max(job_step, r.step_s);
    waits.push_back(std::max(r.step_s - r.compute_s, 0.0));
    if (r.rank < first->rank) first = &r;
  }
  for (auto& [host, list] : ranks_on) std::sort(list.begin(), list.end());
  std::sort(waits.begin(), waits.end());
  const double wait = waits.size() % 2 ? waits[waits.size() / 2]
                                       : (waits[waits.size() / 2 - 1] + waits[waits.size() / 2]) / 2;
  double fastest = 1e300, fastest_upload = 1e300;
  for (const auto& l : links)
    fastest = std::min({fastest, l.upload_s, l.download_s}), fastest_upload = std::min(fastest_upload, l.upload_s);
  if (!(fastest > 0) || reduce_bytes_ <= 0) return {};
  // A ring all-reduce moves 2 (n - 1) / n of the payload over every rank's
  // link, so a link slower than the fastest costs each step its extra time
  // for that many bytes, and at most the wait the job actually has.
  const double n = static_cast<double>(ranks.size());
  const double probes_per_step = 2 * (n - 1) / n * static_cast<double>(reduce_bytes_) / static_cast<double>(probe_bytes_);

  // Rank 0's host, when every download from it is slow against the fastest
  // upload (the end they share), by the fastest of those downloads; then
  // each probed host by its slower direction (only its upload when rank 0's
  // host is the slow end). Every host is looked at in every window, so a
  // named one can recover.
  std::vector<LinkStraggler> candidates;
  double fastest_download = 1e300;
  for (const auto& l : links) fastest_download = std::min(fastest_download, l.download_s);
  const bool rank0_slow = fastest_download >= 2 * fastest_upload;
  candidates.push_back({first->host, ranks_on[first->host], 0, job_step, rank0_slow ? fastest_download : fastest,
                        rank0_slow ? fastest_upload : fastest});
  for (const auto& l : links) {
    const double probe = rank0_slow ? l.upload_s : std::max(l.upload_s, l.download_s);
    candidates.push_back({l.host, ranks_on[l.host], 0, job_step, probe, fastest});
  }
  std::vector<std::string> lines;
  for (auto& c : candidates) {
    c.cost_s = c.probe_s >= 2 * c.fastest_probe_s
                   ? std::min(wait, (c.probe_s - c.fastest_probe_s) * probes_per_step)
                   : 0;
    const bool slow = c.cost_s > 0 && c.cost_s >= t_.min_excess_s && c.cost_s >= t_.min_share_of_step * job_step;
    auto it = std::find_if(states_.begin(), states_.end(), [&](const auto& e) { return e.first == c.host; });
    if (it == states_.end()) it = states_.insert(states_.end(), {c.host, HostState{}});
    HostState& st = it->second;
    st.slow_run = slow ? st.slow_run + 1 : 0;
    st.normal_run = slow ? 0 : st.normal_run + 1;
    if (!st.flagged && st.slow_run >= t_.windows) {
      st.flagged = true;
      if (!st.ever) st.report = {c.host, c.ranks, time_s, 0, 0, 0, false};
      st.ever = true;
      lines.push_back("dlscale: " + link_straggler_message(c, first->host, probe_bytes_));
    } else if (st.flagged && st.normal_run >= t_.windows) {
      st.flagged = false;
      lines.push_back("dlscale: link straggler recovered: " + c.host + "'s link is within the thresholds again");
    }
    if (!st.flagged) continue;
    st.cost_sum += c.cost_s * static_cast<double>(steps), st.step_sum += job_step * static_cast<double>(steps);
    st.report.steps += steps;
    current_.push_back(c);
  }
  return lines;
}

std::vector<LinkStragglerReport> LinkStragglerDetector::reports() const {
  std::vector<LinkStragglerReport> out;
  for (const auto& [host, st] : states_) {
    if (!st.ever) continue;
    LinkStragglerReport r = st.report;
    r.mean_cost_s = r.steps > 0 ? st.cost_sum / static_cast<double>(r.steps) : 0;
    r.share_of_step = st.step_sum > 0 ? st.cost_sum / st.step_sum : 0;
    r.recovered = !st.flagged;
    out.push_back(r);
  }
  return out;
}

}  // namespace dlscale
