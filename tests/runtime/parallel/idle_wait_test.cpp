// An idle rank's wait for the computing ranks, bounded by their heartbeats
// (runtime/parallel/idle_wait.h): fed heartbeats by hand, on a clock the test
// drives. The same with real ranks: FailingRank.IdleRank* (tests/launch).
#include "runtime/parallel/idle_wait.h"

#include <gtest/gtest.h>

namespace dlscale {
namespace {

// Rank 0 computes on node1; rank 1 idles. time: the file's stamp.
std::vector<std::optional<Heartbeat>> beats(double time, std::int64_t work, std::int64_t seq = 0, bool in_collective = false,
                                            const std::string& activity = "", double activity_limit = 0) {
  Heartbeat b;
  b.rank = 0, b.host = "node1", b.time = time;
  b.progress = {work, activity, activity_limit};
  if (seq > 0) b.last = CollectiveEntry{seq, "an all-reduce of metrics", 24, 7, 100, in_collective ? 0.0 : 101.0};
  Heartbeat idle;
  idle.rank = 1, idle.host = "node2", idle.time = time, idle.computes = false;
  return {b, idle};
}

TEST(IdleWait, ARankThatAdvancesIsNeverCalledLost) {
  IdleWaitWatch watch({0}, {"node1", "node2"}, 10);
  for (int t = 0; t < 100; ++t) EXPECT_EQ(watch.look(beats(t, t / 5), t), "") << "at " << t << " s";
}

TEST(IdleWait, ASilentHeartbeatIsNamedAfterTheLimit) {
  IdleWaitWatch watch({0}, {"node1", "node2"}, 10);
  for (int t = 0; t <= 10; ++t) EXPECT_EQ(watch.look(beats(3, 1, 4), t), "") << "at " << t << " s";
  EXPECT_EQ(watch.look(beats(3, 1, 4), 14), "rank 0 (node1) silent for 14 s, last left an all-reduce of metrics #4 at iteration 7");
}

TEST(IdleWait, ARankAliveButStuckOutsideAnyCollectiveIsNamed) {
  IdleWaitWatch watch({0}, {"node1", "node2"}, 10);
  for (int t = 0; t <= 10; ++t) EXPECT_EQ(watch.look(beats(t, 5, 4), t), "") << "at " << t << " s";
  EXPECT_EQ(watch.look(beats(11, 5, 4), 11),
            "rank 0 (node1) is alive but has not advanced for 11 s outside any collective, last left an all-reduce of "
            "metrics #4 at iteration 7");
}

TEST(IdleWait, ALongCheckpointWriteHasItsOwnLimit) {
  IdleWaitWatch watch({0}, {"node1", "node2"}, 10);
  for (int t = 0; t <= 30; ++t)
    EXPECT_EQ(watch.look(beats(t, 5, 4, false, "writing a checkpoint", 30), t), "") << "at " << t << " s";
  EXPECT_NE(watch.look(beats(31, 5, 4, false, "writing a checkpoint", 30), 31.5)
                .find("has not advanced for 32 s while writing a checkpoint"),
            std::string::npos);
}

TEST(IdleWait, ARankInACollectiveIsItsPeersToBound) {
  IdleWaitWatch watch({0}, {"node1", "node2"}, 10);
  for (int t = 0; t < 100; ++t) EXPECT_EQ(watch.look(beats(t, 5, 4, true), t), "") << "at " << t << " s";
}

TEST(IdleWait, NoHeartbeatAtAllIsNamedToo) {
  IdleWaitWatch watch({0, 2}, {"node1", "node2", "node3"}, 10);
  auto b = beats(0, 0);
  b.push_back(std::nullopt);  // rank 2 computes and never wrote one
  EXPECT_EQ(watch.look(b, 0), "");
  b[0]->time = 12;
  b[0]->progress.count = 3;
  EXPECT_EQ(watch.look(b, 12), "rank 2 (node3) wrote no heartbeat for 12 s");
}

TEST(IdleWait, NoLimitWaitsForEver) {
  IdleWaitWatch watch({0}, {"node1", "node2"}, 0);
  EXPECT_EQ(watch.look(beats(0, 0), 0), "");
  EXPECT_EQ(watch.look(beats(0, 0), 1e6), "");
}

}  // namespace
}  // namespace dlscale
