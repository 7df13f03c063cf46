// The live progress bar's text: fraction, ETA and the line drawn, and the
// pacing of redraws (tests/launch/progress_terminal_test.cpp checks it on a
// pseudo-terminal).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "runtime/monitoring/progress_table.h"

namespace dlscale {
namespace {

TEST(ProgressBarText, FractionIsClamped) {
  EXPECT_DOUBLE_EQ(progress_fraction(0, 10), 0.0);
  EXPECT_DOUBLE_EQ(progress_fraction(5, 10), 0.5);
  EXPECT_DOUBLE_EQ(progress_fraction(12, 10), 1.0);
  EXPECT_DOUBLE_EQ(progress_fraction(-1, 10), 0.0);
  EXPECT_DOUBLE_EQ(progress_fraction(3, 0), 0.0);
}

TEST(ProgressBarText, EtaText) {
  EXPECT_EQ(format_eta(-1), "--:--");
  EXPECT_EQ(format_eta(std::nan("")), "--:--");
  EXPECT_EQ(format_eta(std::numeric_limits<double>::infinity()), "--:--");
  EXPECT_EQ(format_eta(0), "00:00");
  EXPECT_EQ(format_eta(65), "01:05");
  EXPECT_EQ(format_eta(3599.4), "59:59");
  EXPECT_EQ(format_eta(3600), "1:00:00");
  EXPECT_EQ(format_eta(90061), "25:01:01");
}

TEST(ProgressBarText, LineShowsEpochBarSpeedAndEtas) {
  ProgressBarState st;
  st.epoch = 2, st.max_epochs = 6, st.batch = 5, st.batches_per_epoch = 10;
  st.iterations_left = 45, st.seconds_per_iteration = 0.5, st.global_batch = 100;
  // 5 batches left in the epoch: 2.5 s; 45 in the run: 22.5 s; 100 samples per 0.5 s.
  EXPECT_EQ(progress_bar(st, 20), "epoch 2/6 [##########----------]  5/10  200 samples/s  ETA 00:03  run 00:23");
  st.batch = 10, st.iterations_left = 40;
  EXPECT_EQ(progress_bar(st, 20), "epoch 2/6 [####################] 10/10  200 samples/s  ETA 00:00  run 00:20");
}

TEST(ProgressBarText, UnknownSpeedShowsNoEta) {
  ProgressBarState st;
  st.epoch = 1, st.max_epochs = 3, st.batch = 1, st.batches_per_epoch = 4, st.iterations_left = 11;
  EXPECT_EQ(progress_bar(st, 8), "epoch 1/3 [##------] 1/4  - samples/s  ETA --:--  run --:--");
}

TEST(ProgressBarPacing, FirstStepAndEpochEndsDrawOthersAtMostTenTimesASecond) {
  ProgressBar bar(3, 4, 32);
  const std::string first = bar.update(1, 0, 1);
  EXPECT_NE(first.find("epoch 1/3"), std::string::npos) << first;
  EXPECT_NE(first.find("ETA --:--"), std::string::npos) << first;  // one step: no speed yet
  EXPECT_EQ(bar.update(2, 0, 2), "");                              // right after a draw
  // The end of epoch 1: its trainer counts say 1 epoch done, batch 0.
  const std::string end = bar.update(4, 1, 0);
  EXPECT_NE(end.find("epoch 1/3 [" + std::string(24, '#') + "] 4/4"), std::string::npos) << end;
  EXPECT_EQ(end.find("ETA --:--"), std::string::npos) << end;  // three timed steps: a speed
}

}  // namespace
}  // namespace dlscale
