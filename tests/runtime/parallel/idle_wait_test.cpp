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
  IdleWaitWatch watch({0}, 10);
  for (int t = 0; t < 100; ++t) EXPECT_EQ(watch.look(beats(t, t / 5), t), "") << "at " << t << " s";
}

TEST(IdleWait, ASilentHeartbeatIsNamedAfterTheLimit) {
  IdleWaitWatch watch({0}, 10);
  for (int t = 0; t <= 10; ++t) EXPECT_EQ(watch.look(beats(3, 1, 4), t), "") << "at " << t << " s";
  EXPECT_EQ(watch.look(beats(3, 1, 4), 14), "rank 0 (node1) silent for 14 s, last left an all-reduce of metrics #4 at iteration 7");
  EXPECT_EQ(watch.lost_host(), "node1");
}

TEST(IdleWait, ARankAliveButStuckOutsideAnyCollectiveIsNamed) {
  IdleWaitWatch watch({0}, 10);
  for (int t = 0; t <= 10; ++t) EXPECT_EQ(watch.look(beats(t, 5, 4), t), "") << "at " << t << " s";
  EXPECT_EQ(watch.look(beats(11, 5, 4), 11),
            "rank 0 (node1) is alive but has not advanced for 11 s outside any collective, last left an all-reduce of "
            "metrics #4 at iteration 7");
}

TEST(IdleWait, ALongCheckpointWriteHasItsOwnLimit) {
  IdleWaitWatch watch({0}, 10);
  for (int t = 0; t <= 30; ++t)
    EXPECT_EQ(watch.look(beats(t, 5, 4, false, "writing a checkpoint", 30), t), "") << "at " << t << " s";
  EXPECT_NE(watch.look(beats(31, 5, 4, false, "writing a checkpoint", 30), 31.5)
                .find("has not advanced for 32 s while writing a checkpoint"),
            std::string::npos);
  EXPECT_TRUE(watch.lost_in_long_work()) << "checkpoint-timeout ran out, not collective-timeout";
}

TEST(IdleWait, ARankInACollectiveIsItsPeersToBound) {
  IdleWaitWatch watch({0}, 10);
  for (int t = 0; t < 100; ++t) EXPECT_EQ(watch.look(beats(t, 5, 4, true), t), "") << "at " << t << " s";
}

// The run directory (and every heartbeat file) is made after start-up's
// checks, which may read a whole dataset: a rank is watched from its first
// beat on, and its host is only excluded when it went silent.
TEST(IdleWait, ARankIsWatchedFromItsFirstHeartbeat) {
  IdleWaitWatch watch({0, 2}, 10);
  auto b = beats(0, 0);
  b.push_back(std::nullopt);  // rank 2 computes and has written no file yet
  for (int t = 0; t <= 100; ++t) {
    b[0]->time = t, b[0]->progress.count = t;
    EXPECT_EQ(watch.look(b, t), "") << "at " << t << " s";
  }
  Heartbeat late;
  late.rank = 2, late.host = "node3", late.time = 100, late.progress.count = 1;
  b[2] = late;  // its first beat, then silence
  for (int t = 101; t <= 111; ++t) {
    b[0]->time = t, b[0]->progress.count = t;
    EXPECT_EQ(watch.look(b, t), "") << "at " << t << " s";
  }
  b[0]->time = 112, b[0]->progress.count = 112;
  EXPECT_EQ(watch.look(b, 112), "rank 2 (node3) silent for 11 s, before its first collective");
  EXPECT_EQ(watch.lost_host(), "node3");
}

TEST(IdleWait, AStuckRanksHostIsNotExcluded) {
  IdleWaitWatch watch({0}, 10);
  for (int t = 0; t <= 11; ++t) watch.look(beats(t, 5, 4), t);
  EXPECT_NE(watch.look(beats(12, 5, 4), 12), "");
  EXPECT_EQ(watch.lost_host(), "") << "alive but stuck: a software hang, not a bad node";
  EXPECT_FALSE(watch.lost_in_long_work());
}

TEST(IdleWait, LongWorkWithoutALimitIsNeverCut) {
  IdleWaitWatch watch({0}, 10);
  for (int t = 0; t < 100; ++t)
    EXPECT_EQ(watch.look(beats(t, 5, 4, false, "writing a checkpoint", 0), t), "") << "at " << t << " s";
}

TEST(IdleWait, NoLimitWaitsForEver) {
  IdleWaitWatch watch({0}, 0);
  EXPECT_EQ(watch.look(beats(0, 0), 0), "");
  EXPECT_EQ(watch.look(beats(0, 0), 1e6), "");
}

}  // namespace
}  // namespace dlscale
