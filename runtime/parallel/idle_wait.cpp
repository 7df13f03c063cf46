#include "runtime/parallel/idle_wait.h"

#include <cmath>

#include "runtime/parallel/lost_ranks.h"

namespace dlscale {

IdleWaitWatch::IdleWaitWatch(std::vector<int> computing, double limit_s)
    : computing_(std::move(computing)), limit_s_(limit_s), seen_(computing_.size()) {}

namespace {
std::string seconds(double s) { return std::to_string(std::llround(s)) + " s"; }
}  // namespace

std::string IdleWaitWatch::look(const std::vector<std::optional<Heartbeat>>& beats, double now) {
  lost_host_.clear(), lost_in_long_work_ = false;
  if (limit_s_ <= 0) return {};
  for (std::size_t i = 0; i < computing_.size(); ++i) {
    const int rank = computing_[i];
    Seen& s = seen_[i];
    const std::optional<Heartbeat>& b = rank < static_cast<int>(beats.size()) ? beats[rank] : std::nullopt;
    // No file yet: the run directory is made after start-up's checks (which
    // may read a whole dataset), so a rank is watched from its first beat on.
    // One killed before it is the launcher's to end; one stopped then, no one's.
    if (!b) continue;
    if (!s.beat_seen || b->time != s.beat_time) {
      if (!s.beat_seen) s.work_changed = now;
      s.beat_seen = true, s.beat_time = b->time, s.beat_changed = now;
    }
    const std::string who = "rank " + std::to_string(rank) + " (" + b->host + ")";
    if (now - s.beat_changed > limit_s_) {
      lost_host_ = b->host;  // silent: its host is excluded from a requeued start
      return who + " silent for " + seconds(now - s.beat_changed) + ", " + last_collective_words(b->last);
    }
    const std::int64_t seq = b->last ? b->last->seq : 0;
    const double ended = b->last ? b->last->ended : 0;
    if (b->progress.count != s.work || seq != s.seq || ended != s.ended)
      s.work = b->progress.count, s.seq = seq, s.ended = ended, s.work_changed = now;
    if (b->last && b->last->ended == 0) continue;  // in a collective: its peers' watchdogs bound it
    const bool long_work = !b->progress.activity.empty();
    if (long_work && b->progress.activity_limit <= 0) continue;  // its option says: no limit
    const double limit = long_work ? b->progress.activity_limit : limit_s_;
    // Alive: its host is not excluded (a hang in software is no bad node).
    if (now - s.work_changed > limit) {
      lost_in_long_work_ = long_work;
      return who + " is alive but has not advanced for " + seconds(now - s.work_changed) +
             (long_work ? " while " + b->progress.activity : std::string(" outside any collective")) + ", " +
             last_collective_words(b->last);
    }
  }
  return {};
}

}  // namespace dlscale
