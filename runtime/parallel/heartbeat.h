// A heartbeat that does not depend on MPI making progress: a thread of each
// rank's own rewrites RUN/heartbeat/rank-N every second (temporary file,
// then rename) with its host, pid, the time and the collective it is in or
// left last (from its CollectiveRecord), and sends rank 0 the same beat as a
// datagram (link_beat.h), which a cut link stops while the file goes on.
// A rank whose file stops changing is silent (stopped, killed, its node
// gone); a rank whose file is fresh but whose last collective is behind the
// others' computes outside any collective. The run directory is on the
// shared filesystem every rank writes to, so any rank can read every file
// without MPI.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/parallel/collective_record.h"
#include "runtime/parallel/link_beat.h"

namespace dlscale {

struct Heartbeat {
  int rank = 0;
  std::string host;
  long pid = 0;
  double process_started = 0;  // tells a requeued start's file from a process left by the one before
  double time = 0;             // when it was written (wall clock of the rank's host)
  bool computes = true;        // false: an idle rank (parallel-auto with GPUs elsewhere)
  std::optional<CollectiveEntry> last;  // the collective entered last
  WorkProgress progress;                     // work outside collectives (idle ranks watch it)
  // Not in the file: rank 0 sets it when its LinkListener stopped hearing a
  // rank whose file is fresh (link_beat.h); time is then when it was heard last.
  bool unreachable = false;
};

std::string heartbeat_file(const std::string& dir, int rank);
std::string to_json_line(const Heartbeat& beat);
// nullopt for a file cut short or not a heartbeat.
std::optional<Heartbeat> parse_heartbeat(const std::string& text);
std::optional<Heartbeat> read_heartbeat(const std::string& dir, int rank);
// Ranks 0 .. world_size-1, each read as above.
std::vector<std::optional<Heartbeat>> read_heartbeats(const std::string& dir, int world_size);

class HeartbeatWriter {
 public:
  // dir: RUN/heartbeat (created once RUN exists). record: this rank's collectives.
  HeartbeatWriter(std::string dir, int rank, const CollectiveRecord& record, double period_s = 1.0);
  ~HeartbeatWriter();
  HeartbeatWriter(const HeartbeatWriter&) = delete;
  HeartbeatWriter& operator=(const HeartbeatWriter&) = delete;
  void set_computes(bool computes);
  // True once a newer process (a requeued start) took this rank's file:
  // this process is a leftover and writes nothing more to the run directory.
  bool superseded() const;

 private:
  bool write_once();  // false: not written (no folder yet, a full disk)
  void run();

  std::string dir_;
  const CollectiveRecord& record_;
  LinkBeatSender link_;  // the same beat over the network, to rank 0
  Heartbeat beat_;
  double period_s_;
  mutable std::mutex mutex_;
  std::condition_variable cv_;
  bool stop_ = false, superseded_ = false;
  std::thread thread_;
};

}  // namespace dlscale
