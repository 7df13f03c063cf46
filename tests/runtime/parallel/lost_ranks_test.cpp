// The collective record's ring, the heartbeat file and the one line that
// names the ranks a waiting job lacks (runtime/parallel/lost_ranks.h).
#include "runtime/parallel/lost_ranks.h"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "runtime/parallel/link_beat.h"
#include "scratch.h"

namespace dlscale {
namespace {

TEST(CollectiveRecord, KeepsTheLastEntriesWithTheirNumbers) {
  CollectiveRecord record(4);
  EXPECT_FALSE(record.last());
  for (int i = 0; i < 6; ++i) {
    record.set_iteration(100 + i);
    record.begin("the gradient all-reduce", 1000 + i);
    if (i < 5) record.end();
  }
  auto entries = record.entries();
  ASSERT_EQ(entries.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(entries[i].seq, 3 + i);
    EXPECT_EQ(entries[i].iteration, 102 + i);
    EXPECT_EQ(entries[i].bytes, 1002 + i);
    EXPECT_EQ(entries[i].kind, "the gradient all-reduce");
    EXPECT_GT(entries[i].started, 0);
  }
  EXPECT_GT(entries[2].ended, 0);
  EXPECT_EQ(entries[3].ended, 0) << "the last one is still running";
  EXPECT_EQ(record.last()->seq, 6);
}

Heartbeat beat(int rank, const std::string& host, double time, std::int64_t seq, const std::string& kind,
               double ended, std::int64_t iteration = 320) {
  Heartbeat b;
  b.rank = rank, b.host = host, b.pid = 100 + rank, b.time = time;
  b.last = CollectiveEntry{seq, kind, 4096, iteration, time - 40, ended};
  return b;
}

TEST(Heartbeat, RoundTripsThroughItsFileAndRefusesAFileCutShort) {
  const auto dir = testing::scratch_dir("heartbeat");
  Heartbeat b = beat(3, "node2", 1000.5, 77, "an all-reduce of metrics", 999.25);
  b.computes = false;
  std::ofstream(heartbeat_file(dir.string(), 3)) << to_json_line(b);
  auto read = read_heartbeat(dir.string(), 3);
  ASSERT_TRUE(read);
  EXPECT_EQ(read->host, "node2");
  EXPECT_EQ(read->pid, 103);
  EXPECT_FALSE(read->computes);
  EXPECT_DOUBLE_EQ(read->time, 1000.5);
  ASSERT_TRUE(read->last);
  EXPECT_EQ(read->last->seq, 77);
  EXPECT_EQ(read->last->kind, "an all-reduce of metrics");
  EXPECT_DOUBLE_EQ(read->last->ended, 999.25);
  const std::string text = to_json_line(b);
  EXPECT_FALSE(parse_heartbeat(text.substr(0, text.size() / 2)));
  EXPECT_FALSE(read_heartbeat(dir.string(), 4)) << "no file";
}

constexpr double kNow = 10000;
constexpr const char* kGrad = "the gradient all-reduce";

TEST(LostRanks, ASilentRankIsNamedWithItsHostAndLastCollective) {
  std::vector<std::optional<Heartbeat>> beats = {
      beat(0, "node1", kNow - 0.5, 5124, kGrad, 0), beat(1, "node2", kNow - 31.2, 5123, kGrad, kNow - 31.5),
      beat(2, "node3", kNow - 0.2, 5124, kGrad, 0), beat(3, "node3", kNow - 0.9, 5124, kGrad, 0)};
  for (bool at_timeout : {false, true}) {
    LostRanks lost = name_lost_ranks(beats, kNow, 5, at_timeout);
    EXPECT_EQ(lost.line,
              "rank 1 (node2) silent for 31 s, last left the gradient all-reduce #5123 at iteration 320; "
              "ranks 0, 2, 3 wait in the gradient all-reduce #5124");
    EXPECT_TRUE(lost.any_silent);
    EXPECT_EQ(lost.silent_hosts, std::vector<std::string>{"node2"});
  }
}

TEST(LostRanks, ADeadNodesRanksShareOneClause) {
  std::vector<std::optional<Heartbeat>> beats = {
      beat(0, "node1", kNow - 0.5, 9, "a broadcast from rank 0", 0, -1),
      beat(1, "node1", kNow - 0.5, 9, "a broadcast from rank 0", 0, -1),
      beat(2, "node2", kNow - 12.4, 9, "a broadcast from rank 0", 0, -1),
      beat(3, "node2", kNow - 11.6, 9, "a broadcast from rank 0", 0, -1)};
  LostRanks lost = name_lost_ranks(beats, kNow, 5, false);
  EXPECT_EQ(lost.line,
            "ranks 2, 3 (node2) silent for 12 s, last in a broadcast from rank 0 #9 in job setup; "
            "ranks 0, 1 wait in a broadcast from rank 0 #9");
}

// Its heartbeat is fresh, but it never entered the collective the others
// wait in: named once the wait timed out, not before (it may be slow).
TEST(LostRanks, ARankComputingOutsideAnyCollectiveIsNamedAtTheTimeout) {
  std::vector<std::optional<Heartbeat>> beats = {
      beat(0, "node1", kNow - 0.5, 5124, kGrad, 0), beat(1, "node1", kNow - 0.4, 5123, kGrad, kNow - 31),
      beat(2, "node2", kNow - 0.2, 5124, kGrad, 0)};
  LostRanks early = name_lost_ranks(beats, kNow, 5, false);
  EXPECT_EQ(early.line, "");
  EXPECT_FALSE(early.any_silent);
  LostRanks lost = name_lost_ranks(beats, kNow, 5, true);
  EXPECT_EQ(lost.line,
            "rank 1 (node1) is alive but has not entered #5124: it left the gradient all-reduce #5123 at iteration "
            "320 31 s ago and computes outside any collective; ranks 0, 2 wait in the gradient all-reduce #5124");
  EXPECT_TRUE(lost.any_behind);
  EXPECT_TRUE(lost.silent_hosts.empty()) << "its host is not to be excluded";
}

TEST(LostRanks, SlowIdleAndMissingRanksAreNotSilent) {
  Heartbeat idle = beat(3, "node2", kNow - 100, 2, "splitting", kNow - 200);
  idle.computes = false;
  // Rank 1 is slow: alive and inside the same collective.
  std::vector<std::optional<Heartbeat>> beats = {beat(0, "node1", kNow - 0.5, 40, kGrad, 0),
                                                 beat(1, "node1", kNow - 1.5, 40, kGrad, 0), std::nullopt, idle};
  LostRanks early = name_lost_ranks(beats, kNow, 5, false);
  EXPECT_FALSE(early.any_silent);
  EXPECT_TRUE(early.any_missing);
  EXPECT_EQ(early.line, "rank 2 sent no heartbeat; ranks 0, 1 wait in the gradient all-reduce #40");
  beats[2] = beat(2, "node2", kNow - 0.1, 40, kGrad, 0);
  LostRanks lost = name_lost_ranks(beats, kNow, 5, true);
  EXPECT_EQ(lost.line,
            "no rank is silent and none is behind: ranks 0-2 wait in the gradient all-reduce #40 at iteration 320 "
            "(a link between nodes cut?)");
}

TEST(LostRanks, RankListsJoinRunsOfThree) {
  EXPECT_EQ(rank_list({1}), "rank 1");
  EXPECT_EQ(rank_list({0, 2}), "ranks 0, 2");
  EXPECT_EQ(rank_list({0, 1, 2, 3, 5, 7, 8}), "ranks 0-3, 5, 7, 8");
}


TEST(LostRanks, AnUnreachableRankIsNamedAsACutLink) {
  std::vector<std::optional<Heartbeat>> beats = {
      beat(0, "node1", kNow - 0.5, 5124, kGrad, 0), beat(1, "node1", kNow - 0.4, 5124, kGrad, 0),
      beat(2, "node2", kNow - 7.4, 5124, kGrad, 0), beat(3, "node2", kNow - 6.6, 5124, kGrad, 0)};
  beats[2]->unreachable = beats[3]->unreachable = true;
  LostRanks lost = name_lost_ranks(beats, kNow, 5, false);
  EXPECT_EQ(lost.line,
            "ranks 2, 3 (node2) unreachable over the network for 7 s, last in the gradient all-reduce #5124 at "
            "iteration 320 (alive by its heartbeat file: a cut link?); ranks 0, 1 wait in the gradient all-reduce "
            "#5124");
  EXPECT_TRUE(lost.any_silent);
  EXPECT_EQ(lost.silent_hosts, std::vector<std::string>{"node2"});
}

bool heard_within(const LinkListener& listener, int rank, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (listener.last_heard(rank) == 0)
    if (std::chrono::steady_clock::now() > end) return false;
    else std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return true;
}

// The listener publishes its port and addresses, a sender that reads them
// is heard, and a datagram without this start's token or with a rank out of
// range counts for nothing.
TEST(LinkBeat, ASenderIsHeardAndForeignDatagramsAreNot) {
  const auto dir = testing::scratch_dir("link-beat");
  LinkListener listener(dir.string(), 4);
  // The listener's thread publishes its file; a sender before that sends nothing.
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!std::ifstream(listener_file(dir.string())) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  std::ifstream in(listener_file(dir.string()));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto where = parse_link_address(text);
  ASSERT_TRUE(where) << text;
  EXPECT_EQ(where->port, listener.address().port);
  EXPECT_EQ(where->addresses.front(), "127.0.0.1");
  EXPECT_FALSE(parse_link_address(text.substr(0, text.size() / 2)));

  // Foreign datagrams: another token, a rank out of range, not ours at all.
  const int fd = socket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(where->port));
  inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  for (const std::string& d : {std::string("dlscale-link 1-2 1"), "dlscale-link " + where->token + " 4",
                               "dlscale-link " + where->token + " -1", std::string("hello 1")})
    sendto(fd, d.data(), d.size(), 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
  close(fd);
  EXPECT_FALSE(heard_within(listener, 1, std::chrono::milliseconds(500)));

  LinkBeatSender sender(dir.string(), 1);
  sender.beat();
  ASSERT_TRUE(heard_within(listener, 1, std::chrono::seconds(10)));
  EXPECT_NEAR(listener.last_heard(1), wall_seconds(), 5);
  for (int rank : {0, 2, 3}) EXPECT_EQ(listener.last_heard(rank), 0) << rank;
}

// A sender with no listener file (rank 0 not there yet) sends nothing and does not fail.
TEST(LinkBeat, ASenderWithoutAListenerDoesNothing) {
  const auto dir = testing::scratch_dir("link-beat-none");
  LinkBeatSender sender(dir.string(), 2);
  sender.beat();
  std::ofstream(listener_file(dir.string())) << "{\"token\": \"x\"";  // cut short
  sender.beat();
}

}  // namespace
}  // namespace dlscale
