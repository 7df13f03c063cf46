// The watchdog thread behind bounded collective waits, and the naming of the
// ranks a wait lacks.
#include "runtime/parallel/watchdog.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "runtime/parallel/lost_ranks.h"

namespace dlscale {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Whole or absent for a reader, and the first writer's: written aside, then
// linked into place, which fails when the file exists (every rank whose
// watchdog fires may try).
void write_first(const std::string& path, const std::string& text, int rank) {
  const std::string tmp = path + ".tmp." + std::to_string(rank) + "." + std::to_string(getpid());
  if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
    const bool written = std::fputs(text.c_str(), f) >= 0;
    if (std::fclose(f) == 0 && written) (void)!link(tmp.c_str(), path.c_str());
    std::remove(tmp.c_str());
  }
}
}  // namespace

CollectiveWatchdog::CollectiveWatchdog(double timeout_s, int rank) : timeout_s_(timeout_s), rank_(rank) {
  if (timeout_s_ > 0) thread_ = std::thread([this] { watch(); });
}

CollectiveWatchdog::~CollectiveWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CollectiveWatchdog::enter(const char* what, double timeout_s, const char* limit_name, std::int64_t bytes) {
  record_.begin(what, bytes);
  since_.store(now_s());
  limit_.store(timeout_s > 0 ? timeout_s : timeout_s_);
  limit_name_.store(timeout_s > 0 && limit_name ? limit_name : "collective-timeout");
  what_.store(what);
}

void CollectiveWatchdog::leave() {
  what_.store(nullptr);
  record_.end();
}

void CollectiveWatchdog::set_context(const std::string& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  context_ = context;
}

void CollectiveWatchdog::set_stop_marker(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_marker_ = path;
}

void CollectiveWatchdog::start_heartbeat(const std::string& dir, int world_size, const std::string& log_path) {
  // Rank 0 listens before any rank can beat, so none is missed at start.
  std::unique_ptr<LinkListener> listener;
  if (rank_ == 0 && world_size > 1) {
    try {
      listener = std::make_unique<LinkListener>(dir, world_size);
    } catch (const std::exception& e) {
      // Without it the file heartbeat still names stopped and killed ranks.
      std::fprintf(stderr, "dlscale: warning: %s; a cut link will not be named\n", e.what());
    }
  }
  auto writer = std::make_unique<HeartbeatWriter>(dir, rank_, record_);
  std::lock_guard<std::mutex> lock(mutex_);
  listener_ = std::move(listener);
  heartbeat_ = std::move(writer);
  heartbeat_started_ = wall_seconds() - 1;  // the writer's first beat came just before
  heartbeat_dir_ = dir;
  world_size_ = world_size;
  log_path_ = log_path;
}

void CollectiveWatchdog::set_computes(bool computes) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (heartbeat_) heartbeat_->set_computes(computes);
}

double CollectiveWatchdog::silent_after_s() const { return std::clamp(timeout_s_ / 3, 2.0, 5.0); }

LostRanks CollectiveWatchdog::lost_ranks_line(bool at_timeout) {
  std::vector<std::optional<Heartbeat>> beats = read_heartbeats(heartbeat_dir_, world_size_);
  // Written before this process started: a previous start's (a requeue), not silence of this one.
  for (auto& b : beats)
    if (b && b->time < heartbeat_started_) b.reset();
  // This rank's own state, first hand: its file may lag by a beat, or not
  // be there yet (job setup runs before rank 0 makes the run directory).
  if (rank_ < world_size_) {
    if (!beats[rank_]) {
      char host[256] = "";
      gethostname(host, sizeof host - 1);
      beats[rank_] = Heartbeat{};
      beats[rank_]->rank = rank_, beats[rank_]->host = host;
    }
    beats[rank_]->time = wall_seconds(), beats[rank_]->last = record_.last();
  }
  // A rank heard over the network before, and no longer, while its file is
  // fresh: its node reaches the run directory but not this rank (a cut link).
  // Both ages are read on this host's clock where they can be: a peer's
  // clock ahead by seconds must not make it unreachable.
  const double now = wall_seconds();
  if (listener_)
    for (int r = 0; r < world_size_; ++r)
      if (const double heard = listener_->last_heard(r); r != rank_ && beats[r] && heard > 0 &&
                                                        now - heard > silent_after_s() &&
                                                        now - beats[r]->time <= silent_after_s())
        beats[r]->time = heard, beats[r]->unreachable = true;
  LostRanks lost = name_lost_ranks(beats, now, silent_after_s(), at_timeout);
  if (!at_timeout && !lost.any_silent) lost.line.clear();
  return lost;
}

void CollectiveWatchdog::report_lost_ranks(const std::string& line, const std::vector<std::string>& hosts) {
  // A process a requeued start has replaced (it hung on a node cut off)
  // says nothing into that start's run directory.
  if (line.empty() || reported_ || (heartbeat_ && heartbeat_->superseded())) return;
  reported_ = true;
  // Another rank said it first: one line per job, not one per rank.
  if (!stop_marker_.empty() && access(stop_marker_.c_str(), F_OK) == 0) return;
  const std::string text = "dlscale: lost ranks: " + line + "\n";
  std::fputs(text.c_str(), stderr);
  std::fflush(stderr);
  if (!log_path_.empty())
    if (std::FILE* f = std::fopen(log_path_.c_str(), "a")) std::fputs(text.c_str(), f), std::fclose(f);
  if (stop_marker_.empty()) return;
  // The silent hosts first, one per line: the job script that finds the
  // marker keeps them out of the requeued start.
  std::string host_lines;
  for (const auto& h : hosts) host_lines += h + "\n";
  if (!hosts.empty()) write_first(stop_marker_ + "-hosts", host_lines, rank_);
  write_first(stop_marker_, line + "\n", rank_);
}

void CollectiveWatchdog::write_lost_ranks_line(const std::string& line, const std::vector<std::string>& hosts) {
  std::lock_guard<std::mutex> lock(mutex_);
  report_lost_ranks(line, hosts);
}

void CollectiveWatchdog::name_lost_ranks_after_mpi_error() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!heartbeat_ || reported_) return;
  const double end = now_s() + silent_after_s() + 2;
  for (;;) {
    // A peer killed a moment ago still has a fresh file: wait until it is stale.
    if (LostRanks lost = lost_ranks_line(false); !lost.line.empty()) return report_lost_ranks(lost.line, lost.silent_hosts);
    if (now_s() >= end) return;
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    lock.lock();
  }
}

void CollectiveWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto period = std::chrono::duration<double>(std::min(1.0, timeout_s_ / 4));
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    const char* what = what_.load();
    const double waited = what ? now_s() - since_.load() : 0;
    const double limit = limit_.load();
    // A peer silent while this rank waits is named at once, before Slurm's
    // node timeout or Open MPI's lost connection ends the job without a word
    // on who was lost. Rank 0 looks first; the others later, in case rank 0
    // is the one gone (each look reads world_size small files).
    if (what && heartbeat_ && !reported_ && waited >= silent_after_s() * (rank_ == 0 ? 1 : 2) && waited < limit)
      if (LostRanks lost = lost_ranks_line(false); !lost.line.empty()) report_lost_ranks(lost.line, lost.silent_hosts);
    if (!what || waited < limit) continue;
    std::fprintf(stderr,
                 "dlscale: rank %d: error: no answer from the other ranks for %.0f s in %s%s%s; a rank has stopped "
                 "responding (hung, stopped or killed), so the job is ended (%s = %g s)\n",
                 rank_, waited, what, context_.empty() ? "" : " at ", context_.c_str(),
                 limit_name_.load(), limit);
    std::fflush(stderr);
    if (heartbeat_) {
      const LostRanks lost = lost_ranks_line(true);
      report_lost_ranks(lost.line, lost.silent_hosts);
    } else if (!stop_marker_.empty()) {
      char text[512];
      std::snprintf(text, sizeof text, "rank %d waited %.0f s in %s%s%s\n", rank_, waited, what,
                    context_.empty() ? "" : " at ", context_.c_str());
      write_first(stop_marker_, text, rank_);
    }
    // Not MPI_Abort: MPI is busy in the blocked thread. A dying rank is what
    // mpirun and srun already turn into the end of the whole job.
    std::_Exit(1);
  }
}

}  // namespace dlscale
