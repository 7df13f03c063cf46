// The watchdog thread behind bounded collective waits.
#include "runtime/parallel/watchdog.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace dlscale {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
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

void CollectiveWatchdog::enter(const char* what, double timeout_s, const char* limit_name) {
  since_.store(now_s());
  limit_.store(timeout_s > 0 ? timeout_s : timeout_s_);
  limit_name_.store(timeout_s > 0 && limit_name ? limit_name : "collective-timeout");
  what_.store(what);
}

void CollectiveWatchdog::leave() { what_.store(nullptr); }

void CollectiveWatchdog::set_context(const std::string& context) {
  std::lock_guard<std::mutex> lock(mutex_);
  context_ = context;
}

void CollectiveWatchdog::set_stop_marker(const std::string& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  stop_marker_ = path;
}

void CollectiveWatchdog::watch() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto period = std::chrono::duration<double>(std::min(1.0, timeout_s_ / 4));
  while (!cv_.wait_for(lock, period, [this] { return stop_; })) {
    const char* what = what_.load();
    const double waited = what ? now_s() - since_.load() : 0;
    const double limit = limit_.load();
    if (!what || waited < limit) continue;
    std::fprintf(stderr,
                 "dlscale: rank %d: error: no answer from the other ranks for %.0f s in %s%s%s; a rank has stopped "
                 "responding (hung, stopped or killed), so the job is ended (%s = %g s)\n",
                 rank_, waited, what, context_.empty() ? "" : " at ", context_.c_str(),
                 limit_name_.load(), limit);
    std::fflush(stderr);
    if (!stop_marker_.empty()) {
      // Whole or absent for a reader: written aside, then renamed (every
      // rank whose watchdog fires may write it; the last rename wins).
      const std::string tmp = stop_marker_ + ".tmp." + std::to_string(rank_);
      if (std::FILE* f = std::fopen(tmp.c_str(), "w")) {
        std::fprintf(f, "rank %d waited %.0f s in %s%s%s\n", rank_, waited, what, context_.empty() ? "" : " at ",
                     context_.c_str());
        if (std::fclose(f) == 0) std::rename(tmp.c_str(), stop_marker_.c_str());
      }
    }
    // Not MPI_Abort: MPI is busy in the blocked thread. A dying rank is what
    // mpirun and srun already turn into the end of the whole job.
    std::_Exit(1);
  }
}

}  // namespace dlscale
