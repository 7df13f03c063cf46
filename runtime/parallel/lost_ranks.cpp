#include "runtime/parallel/lost_ranks.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

namespace dlscale {

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i) out += ", ";
    out += std::to_string(ranks[i]);
    if (j >= i + 2) {  // three or more in a row
      out += '-';
      out += std::to_string(ranks[j]);
      i = j + 1;
    } else {
      i = i + 1;
    }
  }
  return out;
}

namespace {

std::string seconds(double s) { return std::to_string(static_cast<long long>(std::llround(std::max(0.0, s)))) + " s"; }

std::string collective(const CollectiveEntry& e) { return e.kind + " #" + std::to_string(e.seq); }

std::string where(const CollectiveEntry& e) {
  return e.iteration < 0 ? " in job setup" : " at iteration " + std::to_string(e.iteration);
}

}  // namespace

std::string last_collective_words(const std::optional<CollectiveEntry>& last) {
  if (!last) return "before its first collective";
  return (last->ended == 0 ? "last in " : "last left ") + collective(*last) + where(*last);
}

LostRanks name_lost_ranks(const std::vector<std::optional<Heartbeat>>& beats, double now, double silent_after_s,
                          bool name_behind) {
  auto fresh = [&](const std::optional<Heartbeat>& b) { return b && now - b->time <= silent_after_s; };
  // The collective the others wait in: the newest one a live rank is inside.
  std::optional<CollectiveEntry> target;
  for (const auto& b : beats)
    if (fresh(b) && b->computes && b->last && b->last->ended == 0 && (!target || b->last->seq > target->seq))
      target = b->last;

  // Ranks that read the same (host, state) are said together: a dead node's
  // ranks in one clause, silent for the longest of their silences.
  using Key = std::tuple<std::string, std::string, std::string>;  // host, text before the seconds, after them
  struct Clause {
    std::vector<int> ranks;
    double seconds = -1;  // none to say
  };
  std::map<Key, Clause> clauses;
  std::vector<Key> order;
  std::vector<int> waiting, no_beat;
  LostRanks out;
  std::set<std::string> hosts;
  auto add = [&](const Key& key, int rank, double s) {
    auto [it, fresh_key] = clauses.try_emplace(key);
    if (fresh_key) order.push_back(key);
    it->second.ranks.push_back(rank);
    it->second.seconds = std::max(it->second.seconds, s);
  };
  for (std::size_t r = 0; r < beats.size(); ++r) {
    const auto& b = beats[r];
    const int rank = static_cast<int>(r);
    if (!b) {
      no_beat.push_back(rank);
      out.any_missing = true;
      continue;
    }
    if (!b->computes) continue;  // an idle rank waits elsewhere by design
    if (!fresh(b)) {
      out.any_silent = true;
      if (hosts.insert(b->host).second) out.silent_hosts.push_back(b->host);
      const std::string last = last_collective_words(b->last);
      if (b->unreachable)
        add({b->host, " unreachable over the network for ", ", " + last + " (alive by its heartbeat file: a cut link?)"},
            rank, now - b->time);
      else
        add({b->host, " silent for ", ", " + last}, rank, now - b->time);
      continue;
    }
    if (target && b->last && b->last->seq == target->seq && b->last->ended == 0) {
      waiting.push_back(rank);
      continue;
    }
    if (!name_behind || !target || (b->last && b->last->seq >= target->seq)) continue;
    out.any_behind = true;
    if (!b->last)
      add({b->host, " is alive but has not entered any collective", ""}, rank, -1);
    else if (b->last->ended == 0)
      add({b->host, " is alive but still in " + collective(*b->last) + where(*b->last) + " after ", ""}, rank,
          now - b->last->started);
    else
      add({b->host, " is alive but has not entered #" + std::to_string(target->seq) + ": it left " +
                        collective(*b->last) + where(*b->last) + " ",
           " ago and computes outside any collective"},
          rank, now - b->last->ended);
  }

  std::string line;
  auto clause = [&](const std::string& text) { line += (line.empty() ? "" : "; ") + text; };
  for (const auto& key : order) {
    const Clause& c = clauses[key];
    clause(rank_list(c.ranks) + " (" + std::get<0>(key) + ")" + std::get<1>(key) +
           (c.seconds >= 0 ? seconds(c.seconds) : std::string()) + std::get<2>(key));
  }
  if (!no_beat.empty()) clause(rank_list(no_beat) + " sent no heartbeat");
  if (line.empty() && !name_behind) return out;
  if (line.empty()) {
    line = "no rank is silent and none is behind";
    if (target && !waiting.empty())
      line += ": " + rank_list(waiting) + (waiting.size() == 1 ? " waits in " : " wait in ") + collective(*target) + where(*target) + " (a link between nodes cut?)";
    out.line = line;
    return out;
  }
  if (target && !waiting.empty()) clause(rank_list(waiting) + (waiting.size() == 1 ? " waits in " : " wait in ") + collective(*target));
  out.line = line;
  return out;
}

}  // namespace dlscale
