// A bounded wait for collectives: a rank that stops answering (hung, stopped,
// stuck in I/O) would leave every other rank blocked in MPI for ever. Each
// Communicator operation marks what it waits for; a watchdog thread that sees
// one mark older than the timeout prints the rank and the operation and
// aborts the process, which makes mpirun or srun end the whole job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

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
  // names the option that set it.
  void enter(const char* what, double timeout_s = 0, const char* limit_name = nullptr);
  void leave();
  // Extra words for the message, e.g. "iteration 31".
  void set_context(const std::string& context);
  // A file the watchdog writes (its message, best effort) before it ends
  // the process: a job script requeues the job when it finds it.
  void set_stop_marker(const std::string& path);

 private:
  void watch();

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
  bool stop_ = false;
  std::thread thread_;
};

// Scoped mark: CollectiveWatchdog::enter in the constructor, leave in the destructor.
class WatchedWait {
 public:
  WatchedWait(CollectiveWatchdog* dog, const char* what, double timeout_s = 0, const char* limit_name = nullptr)
      : dog_(dog) {
    if (dog_) dog_->enter(what, timeout_s, limit_name);
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
