// The heartbeat over the network. The file heartbeat (heartbeat.h) tells a
// rank that stopped from one that runs, but not a rank whose node lost its
// link to the other nodes yet still reaches the filesystem the run directory
// is on (another network, or a folder local to one machine, as the test
// cluster's is): its file stays fresh while every collective waits for it.
// So each rank's heartbeat thread also sends rank 0 one UDP datagram per
// beat, to the addresses rank 0 publishes in RUN/heartbeat/listener, and
// rank 0 names a rank it heard before and has not heard for a while as
// unreachable. A network that drops these datagrams from the start marks no
// one: a rank counts as unreachable only after it has been heard.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace dlscale {

// Where rank 0 listens: every IPv4 address of its host (loopback for ranks on
// the same host) on one port, and a token of this start, so that a datagram
// from another job or an earlier start that happens to reach the port counts
// for nothing.
struct LinkAddress {
  std::string token;
  int port = 0;
  std::vector<std::string> addresses;
};

std::string listener_file(const std::string& heartbeat_dir);
std::string to_json_line(const LinkAddress& where);
std::optional<LinkAddress> parse_link_address(const std::string& text);  // nullopt: cut short, not one

// Rank 0's end: a socket and a thread that notes when each rank was heard.
class LinkListener {
 public:
  // Binds a UDP port and publishes it in listener_file(dir). Throws
  // std::runtime_error when no socket can be had.
  LinkListener(const std::string& dir, int world_size);
  ~LinkListener();
  LinkListener(const LinkListener&) = delete;
  LinkListener& operator=(const LinkListener&) = delete;
  // Wall-clock time rank was last heard; 0: never.
  double last_heard(int rank) const;
  const LinkAddress& address() const { return where_; }

 private:
  void receive_once();  // one poll of at most 200 ms, then every datagram waiting

  int fd_ = -1;
  LinkAddress where_;
  std::vector<std::atomic<double>> heard_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Every rank's end, called by its heartbeat thread once per beat: reads the
// listener's file (each time: a requeued start publishes a new one) and sends
// one datagram to each of its addresses. Best effort, never blocks.
class LinkBeatSender {
 public:
  LinkBeatSender(std::string dir, int rank);
  ~LinkBeatSender();
  LinkBeatSender(const LinkBeatSender&) = delete;
  LinkBeatSender& operator=(const LinkBeatSender&) = delete;
  void beat();

 private:
  std::string dir_;
  int rank_;
  int fd_ = -1;
};

}  // namespace dlscale
