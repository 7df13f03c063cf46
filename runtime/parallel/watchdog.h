// A bounded wait for collectives: a rank that stops answering (hung, stopped,
// stuck in I/O) would leave every other rank blocked in MPI for ever. Each
// Communicator operation marks what it waits for; a watchdog thread that sees
// one mark older than the timeout prints the rank and the operation and
// aborts the process, which makes mpirun or srun end the whole job.
// Every mark also goes into the rank's CollectiveRecord, and with heartbeats
// on (start_heartbeat) the watchdog names the ranks the job waits for
// (runtime/parallel/lost_ranks.h): as soon as a peer's heartbeat has been
// silent for silent_after_s() while this rank waits, and at the timeout.
// Rank 0 also listens for every rank's beats over the network (link_beat.h)
// and names a rank it stopped hearing while its file is fresh: a cut link.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/parallel/collective_record.h"
#include "runtime/parallel/heartbeat.h"
#include "runtime/parallel/link_beat.h"
#include "runtime/parallel/lost_ranks.h"

namespace dlscale {

class CollectiveWatchdog {
 public:
  // timeout_s <= 0 disables it. rank names this process in the message.
  CollectiveWatchdog(double timeout_s, int rank);
  ~CollectiveWatchdog();
  CollectiveWatchdog(const CollectiveWatchdog&) = delete;
  CollectiveWatchdog& operator=(const CollectiveWatchdog&) = delete;

  // Marks the start and end of a wait; `what` must outlive the wait
  // (a string literal, or a string kept by the caller). timeout_s > 0 bounds
  // this wait instead of the watchdog's timeout; limit_name (a literal) then
  // names the option that set it. bytes: this rank's payload, for the record.
  void enter(const char* what, double timeout_s = 0, const char* limit_name = nullptr, std::int64_t bytes = 0);
  void leave();
  // The iteration the next collectives belong to (the record's; -1: job setup).
  void set_iteration(std::int64_t iteration) { record_.set_iteration(iteration); }
  const CollectiveRecord& record() const { return record_; }
  // Extra words for the message, e.g. "iteration 31".
  void set_context(const std::string& context);
  // A file the watchdog writes (its message, best effort) before it ends
  // the process: a job script requeues the job when it finds it.
  void set_stop_marker(const std::string& path);
  // Starts this rank's heartbeat in dir (RUN/heartbeat) and names lost ranks
  // among world_size from then on: to stderr, log_path (RUN/log.txt) and the
  // stop marker (the first rank's line stays).
  void start_heartbeat(const std::string& dir, int world_size, const std::string& log_path);
  // An idle rank (parallel-auto with GPUs elsewhere) is never waited for.
  void set_computes(bool computes);
  // Work outside collectives, in the heartbeat for idle ranks (idle_wait.h).
  void note_progress() { record_.note_progress(); }
  void set_activity(const char* what, double limit_s) { record_.set_activity(what, limit_s); }
  // Writes line as the job's `dlscale: lost ranks:` line (stderr, log, stop
  // marker), and hosts, the silent ones, to the marker's `-hosts` file
  // (RUN/lost-rank-hosts, one per line: a requeue excludes them), unless
  // this process or another rank wrote one already.
  void write_lost_ranks_line(const std::string& line, const std::vector<std::string>& hosts);
  const std::string& heartbeat_dir() const { return heartbeat_dir_; }
  // After an MPI call failed (a peer's connection closed: killed, its node
  // gone), looks at the heartbeats for at most silent_after_s() + 2 s and
  // names the ranks gone silent, before the error ends this rank: MPI's
  // message names at most a host, and only sometimes.
  void name_lost_ranks_after_mpi_error();
  // A heartbeat older than this is silent: a third of the timeout, 2 to 5 s
  // (beats come every second; a live rank's are at most ~1 s old).
  double silent_after_s() const;

 private:
  void watch();
  // The line naming lost ranks, and their hosts, from every rank's heartbeat
  // (the line is empty: none yet).
  LostRanks lost_ranks_line(bool at_timeout);
  void report_lost_ranks(const std::string& line, const std::vector<std::string>& hosts);

  double timeout_s_;
  int rank_;
  std::atomic<const char*> what_{nullptr};
  std::atomic<double> since_{0};
  std::atomic<double> limit_{0};  // of the current wait
  std::atomic<const char*> limit_name_{"collective-timeout"};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::string context_;
  std::string stop_marker_;
  CollectiveRecord record_;
  std::unique_ptr<LinkListener> listener_;  // rank 0's: the beats over the network
  std::unique_ptr<HeartbeatWriter> heartbeat_;
  std::string heartbeat_dir_, log_path_;
  int world_size_ = 0;
  double heartbeat_started_ = 0;
  bool reported_ = false;  // the line is written once per process
  bool stop_ = false;
  std::thread thread_;
};

// Scoped long work (set_activity), cleared however the scope ends.
class ScopedActivity {
 public:
  ScopedActivity(CollectiveWatchdog& dog, const char* what, double limit_s) : dog_(dog) {
    dog_.set_activity(what, limit_s);
  }
  ~ScopedActivity() { dog_.set_activity(nullptr, 0); }
  ScopedActivity(const ScopedActivity&) = delete;
  ScopedActivity& operator=(const ScopedActivity&) = delete;

 private:
  CollectiveWatchdog& dog_;
};

// Scoped mark: CollectiveWatchdog::enter in the constructor, leave in the destructor.
class WatchedWait {
 public:
  WatchedWait(CollectiveWatchdog* dog, const char* what, double timeout_s = 0, const char* limit_name = nullptr,
              std::int64_t bytes = 0)
      : dog_(dog) {
    if (dog_) dog_->enter(what, timeout_s, limit_name, bytes);
  }
  ~WatchedWait() {
    if (dog_) dog_->leave();
  }
  WatchedWait(const WatchedWait&) = delete;
  WatchedWait& operator=(const WatchedWait&) = delete;

 private:
  CollectiveWatchdog* dog_;
};

}  // namespace dlscale
