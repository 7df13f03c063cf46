// BucketSchedule (runtime/parallel/bucket_schedule.h), the scheduling half of
// the GPU rank's NCCL buckets, against a reducer that records what it is
// asked to do. NCCL needs every rank to issue the same calls in the same
// order, so the order of the record is what these tests check:
//  - a bucket starts when its last param is reported, never before an
//    earlier bucket (a complete later bucket waits, then both start in order);
//  - params of no bucket change nothing; a param reported twice is an error
//    (counting it twice would start its bucket before its other params);
//  - finish() starts what is left in order, then waits once; the next step
//    runs the same way (counts and reports reset);
//  - the layout check refuses gaps, another order, empty buckets and a param
//    in two buckets, naming bucket and param.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "expect_error.h"
#include "runtime/parallel/bucket_schedule.h"

namespace dlscale::testing {
namespace {

class RecordingReducer : public BucketReducer {
 public:
  void start(const BucketRange& r) override {
    log.push_back("start " + std::to_string(r.bucket) + " [" + std::to_string(r.offset) + "," +
                  std::to_string(r.offset + r.count) + ")");
  }
  void wait() override { log.push_back("wait"); }
  std::vector<std::string> take() { return std::exchange(log, {}); }
  std::vector<std::string> log;
};

using Log = std::vector<std::string>;

// Six params of sizes 1..6 laid out back to back as GradientBuckets would:
// bucket 0 = {p[0], p[1]}, bucket 1 = {p[2]}, bucket 2 = {p[3], p[4], p[5]}.
class BucketScheduleTest : public ::testing::Test {
 protected:
  BucketScheduleTest() : params_(6) {
    std::size_t offset = 0;
    for (std::size_t i = 0; i < params_.size(); ++i) {
      params_[i].name = "p" + std::to_string(i);
      spans_[&params_[i]] = {offset, i + 1};
      offset += i + 1;
    }
  }
  Param* p(std::size_t i) { return &params_[i]; }
  std::vector<std::vector<Param*>> plan() { return {{p(0), p(1)}, {p(2)}, {p(3), p(4), p(5)}}; }
  std::function<BucketSchedule::Span(const Param*)> spans() {
    return [this](const Param* q) { return spans_.at(q); };
  }

  std::vector<Param> params_;
  std::map<const Param*, BucketSchedule::Span> spans_;
  RecordingReducer reducer_;
};

TEST_F(BucketScheduleTest, RangesCoverEachBucketsGradients) {
  BucketSchedule s(plan(), spans(), reducer_);
  ASSERT_EQ(s.bucket_count(), 3u);
  EXPECT_EQ(s.range(0).offset, 0u);
  EXPECT_EQ(s.range(0).count, 3u);
  EXPECT_EQ(s.range(1).offset, 3u);
  EXPECT_EQ(s.range(1).count, 3u);
  EXPECT_EQ(s.range(2).offset, 6u);
  EXPECT_EQ(s.range(2).count, 15u);
  EXPECT_TRUE(reducer_.log.empty());
}

TEST_F(BucketScheduleTest, InOrderReadinessStartsEachBucketWithItsLastParam) {
  BucketSchedule s(plan(), spans(), reducer_);
  s.mark_ready({p(0)});
  EXPECT_EQ(reducer_.take(), Log{}) << "bucket 0 still waits for p1";
  s.mark_ready({p(1)});
  EXPECT_EQ(reducer_.take(), Log{"start 0 [0,3)"});
  s.mark_ready({});
  EXPECT_EQ(reducer_.take(), Log{});
  s.mark_ready({p(2), p(3)});
  EXPECT_EQ(reducer_.take(), Log{"start 1 [3,6)"});
  s.mark_ready({p(4), p(5)});
  EXPECT_EQ(reducer_.take(), Log{"start 2 [6,21)"});
  s.finish();
  EXPECT_EQ(reducer_.take(), Log{"wait"}) << "nothing was left to start";
}

TEST_F(BucketScheduleTest, ALaterCompleteBucketWaitsForTheEarlierOnes) {
  BucketSchedule s(plan(), spans(), reducer_);
  s.mark_ready({p(3), p(4), p(5)});  // bucket 2 complete first
  EXPECT_EQ(reducer_.take(), Log{});
  s.mark_ready({p(2)});  // bucket 1 complete, bucket 0 not
  EXPECT_EQ(reducer_.take(), Log{});
  EXPECT_EQ(s.started(), 0u);
  s.mark_ready({p(1), p(0)});
  EXPECT_EQ(reducer_.take(), (Log{"start 0 [0,3)", "start 1 [3,6)", "start 2 [6,21)"}));
  s.finish();
  EXPECT_EQ(reducer_.take(), Log{"wait"});
}

TEST_F(BucketScheduleTest, UnknownParamsChangeNothing) {
  BucketSchedule s(plan(), spans(), reducer_);
  Param stranger{"stranger", {}, {}};
  s.mark_ready({&stranger, p(0)});
  s.mark_ready({&stranger});
  EXPECT_EQ(reducer_.take(), Log{}) << "bucket 0 still waits for p1";
  s.mark_ready({p(1)});
  EXPECT_EQ(reducer_.take(), Log{"start 0 [0,3)"});
}

TEST_F(BucketScheduleTest, AParamReportedTwiceInOneStepIsAnError) {
  BucketSchedule s(plan(), spans(), reducer_);
  s.mark_ready({p(0)});
  // Counted twice, it would complete bucket 0 while p1's gradient is still being written.
  expect_error([&] { s.mark_ready({p(0)}); }, "param 'p0' of gradient bucket 0 was reported ready twice");
  EXPECT_EQ(reducer_.take(), Log{});
  expect_error([&] { s.mark_ready({p(2), p(2)}); }, "'p2' of gradient bucket 1 was reported ready twice");
}

TEST_F(BucketScheduleTest, FinishStartsWhatIsLeftInOrderThenWaits) {
  BucketSchedule s(plan(), spans(), reducer_);
  s.mark_ready({p(5), p(0), p(1)});
  EXPECT_EQ(reducer_.take(), Log{"start 0 [0,3)"});
  s.finish();
  EXPECT_EQ(reducer_.take(), (Log{"start 1 [3,6)", "start 2 [6,21)", "wait"}));
  s.finish();  // a step whose backward reported nothing
  EXPECT_EQ(reducer_.take(), (Log{"start 0 [0,3)", "start 1 [3,6)", "start 2 [6,21)", "wait"}));
}

TEST_F(BucketScheduleTest, TheNextStepStartsFromFreshCounts) {
  BucketSchedule s(plan(), spans(), reducer_);
  for (int step = 0; step < 3; ++step) {
    s.mark_ready({p(4), p(5)});
    s.mark_ready({p(3), p(2)});
    EXPECT_EQ(reducer_.take(), Log{}) << "step " << step << ": bucket 0 is not complete";
    s.mark_ready({p(1)});
    EXPECT_EQ(reducer_.take(), Log{}) << "step " << step << ": p0 of the last step must not count";
    s.mark_ready({p(0)});  // reported once per step: no error
    EXPECT_EQ(reducer_.take(), (Log{"start 0 [0,3)", "start 1 [3,6)", "start 2 [6,21)"})) << "step " << step;
    s.finish();
    EXPECT_EQ(reducer_.take(), Log{"wait"}) << "step " << step;
    EXPECT_EQ(s.started(), 0u);
  }
}

TEST_F(BucketScheduleTest, LayoutOutOfBucketOrderIsRefusedNamingBucketAndParam) {
  // p2 placed after p3 (the device network in forward order, say): p4
  // no longer follows p3, so bucket 2's range would cover p2 instead.
  spans_[p(2)] = {7, 3};
  spans_[p(3)] = {3, 4};
  expect_error([&] { BucketSchedule(plan(), spans(), reducer_); },
               "gradients are not laid out in bucket order: bucket 2, param 1 ('p4') starts at element 10, where "
               "the bucket's previous gradient ends at element 7");
  // The params of one bucket swapped.
  expect_error([&] { BucketSchedule({{p(1), p(0)}}, spans(), reducer_); },
               "bucket 0, param 1 ('p0') starts at element 0, where the bucket's previous gradient ends at element 3");
}

TEST_F(BucketScheduleTest, AGapInsideABucketIsRefused) {
  spans_[p(1)] = {2, 2};  // one element after p0's end
  expect_error([&] { BucketSchedule(plan(), spans(), reducer_); },
               "bucket 0, param 1 ('p1') starts at element 2, where the bucket's previous gradient ends at element 1");
}

TEST_F(BucketScheduleTest, EmptyBucketsAndParamsInTwoBucketsAreRefused) {
  expect_error([&] { BucketSchedule({{p(0)}, {}}, spans(), reducer_); }, "gradient bucket 1 has no params");
  expect_error([&] { BucketSchedule({{p(0), p(1)}, {p(0)}}, spans(), reducer_); },
               "param 'p0' is in gradient buckets 0 and 1");
  EXPECT_TRUE(reducer_.log.empty());
}

}  // namespace
}  // namespace dlscale::testing
