// Job states without a cluster: Slurm's view is given by hand, the job
// folder's records are written by the test. Covers what happens once the
// controller has forgotten a job (after MinJobAge) and how progress is read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "slurm/jobs.h"
#include "slurm/node_failures.h"
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


// What log.txt held after node2 of a 2x2 job was killed (Open MPI's and
// Slurm's lines as they were seen on the test cluster), and the requeued
// start that followed on node3 and node4.
constexpr const char* kNodeFailureLog =
    "dlscale: 4 rank(s), 4 computing, execution-environment parallel-auto, precision single\n"
    "   rank  host   local  device   threads  CUDA_VISIBLE_DEVICES\n"
    "      0  node1      0  cpu            1  (unset)\n"
    "      1  node1      1  cpu            1  (unset)\n"
    "      2  node2      0  cpu            1  (unset)\n"
    "      3  node2      1  cpu            1  (unset)\n"
    "note: training on the CPU\n"
    "|       1 |         200 |       00:00:16 |       84.38% |\n"
    "  Local host: node1\n"
    "  Peer host:  node2\n"
    "srun: error: Node failure on node2\n"
    "slurmstepd-node1: error: *** JOB 22 ON node1 CANCELLED AT 2026-12-03T21:10:35 DUE TO NODE FAILURE ***\n"
    "srun: error: Node failure on node2\n"
    "dlscale: 4 rank(s), 4 computing, execution-environment parallel-auto, precision single\n"
    "   rank  host   local  device   threads  CUDA_VISIBLE_DEVICES\n"
    "      0  node3      0  cpu            1  (unset)\n"
    "      1  node3      1  cpu            1  (unset)\n"
    "      2  node4      0  cpu            1  (unset)\n"
    "      3  node4      1  cpu            1  (unset)\n"
    "resumed from run/checkpoints/ckpt-300.h5 at iteration 300\n";

TEST(NodeFailures, NamesTheNodeAndTheRanksOfTheStartThatFailed) {
  auto f = node_failures(kNodeFailureLog);
  ASSERT_EQ(f.size(), 1u);  // srun said it twice
  EXPECT_EQ(f[0].node, "node2");
  EXPECT_EQ(f[0].ranks, (std::vector<int>{2, 3}));
  EXPECT_EQ(describe(f), "node2 failed (ranks 2, 3)");
}

TEST(NodeFailures, EachStartSpeaksForItselfAndALogWithoutFailuresHasNone) {
  std::string twice = std::string(kNodeFailureLog) + "srun: error: Node failure on node4\n";
  auto f = node_failures(twice);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(describe(f), "node2 failed (ranks 2, 3); node4 failed (ranks 2, 3)");
  // A failure before any rank table (the step never started): the node alone.
  EXPECT_EQ(describe(node_failures("srun: error: Node failure on node9\n")), "node9 failed");
  // Open MPI's lost connection alone (the node came back before Slurm noticed).
  EXPECT_EQ(describe(node_failures("   rank  host   local\n      0  n1      0  cpu\n      1  n2      0  cpu\n"
                                   "  Local host: n1\n  Peer host:  n2\n")),
            "n2 failed (rank 1)");
  EXPECT_TRUE(node_failures("   rank  host   local\n      0  node1      0  cpu\n|  1 |  100 |\n").empty());
}

// dlscale's own line names the silent node whoever ended the job; a rank
// alive outside any collective is no node failure, but its line is kept.
TEST(NodeFailures, DlscalesLostRanksLineNamesTheSilentNode) {
  const std::string table = "   rank  host   local\n      0  n1      0  cpu\n      1  n2      0  cpu\n      2  n2      1  cpu\n";
  const std::string silent =
      "ranks 1, 2 (n2) silent for 6 s, last in the gradient all-reduce #9 at iteration 3; rank 0 waits in the "
      "gradient all-reduce #10";
  const std::string log = table + "dlscale: lost ranks: " + silent + "\n";
  EXPECT_EQ(describe(node_failures(log)), "n2 failed (ranks 1, 2)");
  EXPECT_EQ(lost_rank_lines(log), std::vector<std::string>{silent});
  const std::string alive = table + "dlscale: lost ranks: rank 1 (n2) is alive but has not entered #10: it left ...\n";
  EXPECT_TRUE(node_failures(alive).empty());
  EXPECT_EQ(lost_rank_lines(alive).size(), 1u);
}

}  // namespace
}  // namespace dlscale
