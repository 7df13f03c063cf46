// Job states without a cluster: Slurm's view is given by hand, the job
// folder's records are written by the test. Covers what happens once the
// controller has forgotten a job (after MinJobAge) and how progress is read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "slurm/jobs.h"
#include "slurm/process.h"
#include "synthetic_data.h"

namespace dlscale {
namespace {

namespace fs = std::filesystem;

class JobStatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = testing::scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    job.dir = dir.string();
    job.folder = "mlp-1";
    job.type = "slurm";
    job.slurm_id = "42";
  }
  SlurmView view(std::map<std::string, std::string> states) {
    SlurmView v;
    v.reachable = true;
    v.states = std::move(states);
    return v;
  }
  fs::path dir;
  JobRecord job;
};

TEST_F(JobStatusTest, SlurmStatesWhileTheControllerKnowsTheJob) {
  EXPECT_EQ(job_status(job, view({{"42", "PENDING"}})).state, JobState::queued);
  EXPECT_EQ(job_status(job, view({{"42", "RUNNING"}})).state, JobState::running);
  EXPECT_EQ(job_status(job, view({{"42", "COMPLETING"}})).state, JobState::running);
  JobStatus t = job_status(job, view({{"42", "TIMEOUT"}}));
  EXPECT_EQ(t.state, JobState::failed);
  EXPECT_EQ(t.detail, "Slurm: TIMEOUT");
  EXPECT_EQ(job_status(job, view({{"42", "CANCELLED"}})).state, JobState::cancelled);
}

TEST_F(JobStatusTest, FinalSlurmStateIsKeptInTheFolder) {
  EXPECT_EQ(job_status(job, view({{"42", "CANCELLED"}})).state, JobState::cancelled);
  EXPECT_EQ(read_record(job.dir, "slurm-state"), "CANCELLED");
  // The controller forgot it (MinJobAge): the folder still knows.
  EXPECT_EQ(job_status(job, view({})).state, JobState::cancelled);
}

TEST_F(JobStatusTest, ExitStatusDecidesOnceSlurmForgot) {
  write_record(job.dir, "started", "2026-01-01T00:00:00Z");
  EXPECT_EQ(job_status(job, view({})).state, JobState::failed);  // started, no exit status: lost
  write_record(job.dir, "exit-status", "0");
  EXPECT_EQ(job_status(job, view({})).state, JobState::done);
  write_record(job.dir, "exit-status", "3");
  JobStatus s = job_status(job, view({}));
  EXPECT_EQ(s.state, JobState::failed);
  EXPECT_EQ(s.detail, "exit status 3");
  // Unreachable Slurm: the folder alone.
  EXPECT_EQ(job_status(job, SlurmView{}).state, JobState::failed);
}

TEST_F(JobStatusTest, CancelMarkWins) {
  write_record(job.dir, "cancelled", "2026-01-01T00:00:00Z");
  write_record(job.dir, "exit-status", "143");
  EXPECT_EQ(job_status(job, view({{"42", "RUNNING"}})).state, JobState::cancelled);
}

TEST_F(JobStatusTest, NeverSubmittedIsUnknown) {
  job.slurm_id.clear();
  JobStatus s = job_status(job, view({}));
  EXPECT_EQ(s.state, JobState::unknown);
  EXPECT_NE(s.detail.find("not submitted"), std::string::npos);
}

TEST_F(JobStatusTest, LocalJobWhoseProcessIsGoneWithoutExitStatusFailed) {
  job.type = "local";
  job.slurm_id.clear();
  job.pid = 999999999;  // no such process
  job.pid_start = 1;
  EXPECT_EQ(job_status(job, SlurmView{}).state, JobState::failed);
  job.pid = getpid();  // alive, but started at another time: a reused pid is not the job
  EXPECT_EQ(job_status(job, SlurmView{}).state, JobState::failed);
  job.pid_start = process_start_time(getpid());
  EXPECT_EQ(job_status(job, SlurmView{}).state, JobState::running);
}

TEST_F(JobStatusTest, ArrayStatesAreCombined) {
  job.array_size = 3;
  for (int i = 0; i < 3; ++i) fs::create_directories(task_dir(job, i));
  JobStatus s = job_status(job, view({{"42_0", "COMPLETED"}, {"42_1", "RUNNING"}, {"42_2", "PENDING"}}));
  EXPECT_EQ(s.state, JobState::running);
  EXPECT_EQ(s.tasks_done, 1);
  s = job_status(job, view({{"42_0", "COMPLETED"}, {"42_1", "COMPLETED"}, {"42_2", "COMPLETED"}}));
  EXPECT_EQ(s.state, JobState::done);
  EXPECT_EQ(s.detail, "3/3 tasks done");
}

TEST_F(JobStatusTest, ProgressFromTheLastIterationLine) {
  fs::create_directories(dir / "run");
  std::ofstream(dir / "run" / "config.ini") << "max-epochs = 5\n";
  std::ofstream(dir / "run" / "metrics.jsonl")
      << R"({"type":"iteration","epoch":1,"iteration":10,"loss":0.9})" "\n"
      << R"({"type":"iteration","epoch":2,"iteration":20,"loss":0.5})" "\n"
      << R"({"type":"validation","epoch":2,"iteration":20,"loss":0.7})" "\n"
      << R"({"type":"iteration","epoch":2,"iter)";  // being written
  Progress p = read_progress((dir / "run").string());
  ASSERT_TRUE(p.known);
  EXPECT_EQ(p.epoch, 2);
  EXPECT_EQ(p.max_epochs, 5);
  EXPECT_EQ(p.iteration, 20);
  EXPECT_DOUBLE_EQ(p.loss, 0.5);
  EXPECT_FALSE(read_progress((dir / "nowhere").string()).known);
}

}  // namespace
}  // namespace dlscale
