// A failing rank brings the whole job down, under mpirun -n 4: a rank that
// raises an error (DLSCALE_FAIL_AT) and a rank killed with SIGKILL mid-epoch
// both end every process within a minute, and no model.h5 is left behind.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <thread>

#include "cli_helpers.h"

namespace dlscale::testing {
namespace {

using Clock = std::chrono::steady_clock;

class FailingRank : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_dataset((dir / "train").string(), separable_images(4000, 4, 1), 4);
    std::ofstream(dir / "long.ini") << "train-data = " << (dir / "train").string() << "\n"
                                    << "input = 1x8x8\nlayer = dense units=64\nlayer = relu\n"
                                       "layer = dense units=4\nlayer = softmax\n"
                                       "max-epochs = 1000\nmini-batch-size = 16\nverbose-frequency = 1\n"
                                       "threads = 1\n";
  }
  std::string job() const {
    return "mpirun -n 4 --oversubscribe " + dlscale_binary() + " train " + (dir / "long.ini").string() +
           " --output " + (dir / "run").string();
  }
  // Starts the job (or another command) in the background; its output goes to out.txt.
  pid_t start_job() const { return start(job()); }
  pid_t start(const std::string& job_command) const {
    pid_t pid = fork();
    if (pid == 0) {
      std::string command = "exec " + job_command + " >" + (dir / "out.txt").string() + " 2>&1";
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  // Waits until iteration rows reach metrics.jsonl: training is under way.
  void wait_for_training() const {
    const auto metrics = dir / "run" / "metrics.jsonl";
    for (int i = 0; i < 600 && !(fs::exists(metrics) && fs::file_size(metrics) > 2000); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  // Seconds until pid exited (status set), or -1 after `limit` seconds (then it is killed).
  static double wait_for_exit(pid_t pid, double limit, int& status) {
    const auto t0 = Clock::now();
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (Clock::now() - t0 > std::chrono::duration<double>(limit)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  // Processes whose command line names this test's run directory (mpirun and its ranks).
  std::vector<pid_t> job_processes() const {
    // "[-]-output" matches "--output" but not the shell running this pgrep.
    auto r = run_command("pgrep -f -- '[-]-output " + (dir / "run").string() + "'", dir);
    std::vector<pid_t> pids;
    std::istringstream in(r.out);
    for (pid_t p; in >> p;) pids.push_back(p);
    return pids;
  }
  fs::path dir;
};

TEST_F(FailingRank, ErrorOnOneRankEndsTheJobWithItsMessage) {
  const auto t0 = Clock::now();
  RunResult r = run_command("DLSCALE_FAIL_AT=2:30 timeout 120 " + job(), dir);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_LT(seconds, 60);
  EXPECT_NE(r.err.find("dlscale: rank 2 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("): error: injected failure at iteration 30"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));
  EXPECT_TRUE(job_processes().empty()) << "processes left behind";
}

TEST_F(FailingRank, KilledRankEndsTheJob) {
  pid_t mpirun = start_job();
  ASSERT_GT(mpirun, 0);
  wait_for_training();
  ASSERT_TRUE(fs::exists(dir / "run" / "metrics.jsonl")) << read_file(dir / "out.txt");
  pid_t victim = -1;
  for (pid_t p : job_processes())
    if (p != mpirun) victim = p;
  ASSERT_GT(victim, 0);
  kill(victim, SIGKILL);
  int status = 0;
  const double seconds = wait_for_exit(mpirun, 90, status);
  EXPECT_GE(seconds, 0) << "mpirun was still running 90 s after a rank was killed";
  EXPECT_LT(seconds, 60);
  EXPECT_FALSE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  EXPECT_TRUE(job_processes().empty()) << "processes left behind";
}

// Ranks started with different options would diverge or hang: the job stops
// at start, naming the rank.
TEST_F(FailingRank, RanksWithDifferentConfigsStopAtStart) {
  RunResult r = run_command("timeout 60 mpirun -n 2 --oversubscribe sh -c '" + dlscale_binary() + " train " +
                                (dir / "long.ini").string() + " --output " + (dir / "run").string() +
                                " --seed $OMPI_COMM_WORLD_RANK'",
                            dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung";
  EXPECT_NE(r.err.find("rank 1 has a different configuration than rank 0"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));
}

// A rank that stops answering (here: sleeps for ever at iteration 30) ends
// the job through the others' collective timeout, with a message naming the
// waiting rank, the collective and the iteration.
TEST_F(FailingRank, HungRankEndsTheJobAfterTheCollectiveTimeout) {
  const auto t0 = Clock::now();
  RunResult r = run_command("DLSCALE_HANG_AT=1:30 timeout 120 " + job() + " --collective-timeout 5", dir);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_LT(seconds, 60);
  EXPECT_NE(r.err.find("error: no answer from the other ranks for "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" s in the gradient all-reduce at iteration 30"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(collective-timeout = 5 s)"), std::string::npos) << r.err;
  EXPECT_TRUE(job_processes().empty()) << "processes left behind";
}

// The one line naming whom the job waits for: to stderr, RUN/log.txt and
// RUN/lost-rank alike.
std::string host_name() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}
std::string lost_line(const RunResult& r) {
  const std::string prefix = "dlscale: lost ranks: ";
  const auto at = r.err.find(prefix);
  if (at == std::string::npos) return "";
  return r.err.substr(at + prefix.size(), r.err.find('\n', at) - at - prefix.size());
}
void expect_the_line_everywhere(const fs::path& run, const std::string& line) {
  EXPECT_EQ(read_file(run / "lost-rank"), line + "\n");
  EXPECT_NE(read_file(run / "log.txt").find("dlscale: lost ranks: " + line + "\n"), std::string::npos);
}

// SIGSTOP at iteration 8000 (several seconds in): rank 1 is alive but
// silent, its heartbeat thread stopped with it.
// Rank 0 names it as soon as its heartbeat is 5 s old (a third of the
// timeout; a live rank's is at most about 1 s old), before the timeout ends the job.
TEST_F(FailingRank, StoppedRankIsNamedWithItsHostAndLastCollective) {
  RunResult r = run_command("DLSCALE_SIGNAL_AT=1:8000:" + std::to_string(SIGSTOP) + " timeout 300 " + job() +
                                " --collective-timeout 15",
                            dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
  // Its last heartbeat (at most a second before the stop) says where it was:
  // any collective, such as "the step-boundary agreement (stop and checkpoint
  // decisions)", hence the parentheses.
  const std::string line = lost_line(r);
  EXPECT_TRUE(std::regex_match(line, std::regex("rank 1 \\(" + host_name() +
                                                "\\) silent for [0-9]+ s, last (in|left) [a-z ()-]+ #[0-9]+ at iteration "
                                                "[0-9]+; ranks 0, 2, 3 wait in the gradient all-reduce #[0-9]+")))
      << r.err;
  expect_the_line_everywhere(dir / "run", line);
  EXPECT_TRUE(job_processes().empty()) << "processes left behind";
}

// DLSCALE_HANG_AT: rank 1's main thread waits for ever outside any
// collective, its heartbeat fresh. Named at the timeout, as computing
// outside any collective.
TEST_F(FailingRank, RankStuckOutsideAnyCollectiveIsNamedAtTheTimeout) {
  RunResult r = run_command("DLSCALE_HANG_AT=1:30 timeout 120 " + job() + " --collective-timeout 8", dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
  const std::string line = lost_line(r);
  EXPECT_EQ(line.rfind("rank 1 (" + host_name() + ") is alive but has not entered #", 0), 0u) << r.err;
  EXPECT_NE(line.find(" at iteration 29 "), std::string::npos) << line;
  EXPECT_NE(line.find(" ago and computes outside any collective; ranks 0, 2, 3 wait in the gradient all-reduce #"),
            std::string::npos)
      << line;
  expect_the_line_everywhere(dir / "run", line);
}

// A rank 7 s slow in every step makes the others wait longer than a
// heartbeat may be old (5 s here), so they look; its heartbeat is fresh and
// it reaches every collective within the timeout: nobody is named.
TEST_F(FailingRank, SlowRankIsNotCalledLost) {
  RunResult r = run_command("DLSCALE_SLOW_RANK=1:7000 timeout 300 " + job() +
                                " --collective-timeout 15 --max-epochs 1 --mini-batch-size 2000",
                            dir);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(lost_line(r), "") << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "lost-rank"));
  EXPECT_TRUE(fs::exists(dir / "run" / "model.h5"));
}

// Slurm's --signal delivers SIGUSR1: every rank stops at the same step
// boundary, rank 0 checkpoints, the job exits with code 3, and --resume auto
// finishes the run.
TEST_F(FailingRank, SignalStopsAtACheckpointAndResumeFinishes) {
  std::ofstream(dir / "long.ini", std::ios::app) << "checkpoint-frequency = 1000\ncheckpoint-frequency-unit = iteration\n";
  pid_t mpirun = start_job();
  ASSERT_GT(mpirun, 0);
  wait_for_training();
  kill(mpirun, SIGUSR1);  // mpirun forwards SIGUSR1 to every rank
  int status = 0;
  ASSERT_GE(wait_for_exit(mpirun, 60, status), 0) << read_file(dir / "out.txt");
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << read_file(dir / "out.txt");
  EXPECT_NE(read_file(dir / "out.txt").find("stopped by a signal at iteration"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));
  bool has_checkpoint = false;
  for (auto& e : fs::directory_iterator(dir / "run" / "checkpoints")) has_checkpoint |= e.path().extension() == ".h5";
  EXPECT_TRUE(has_checkpoint);

  RunResult resumed = run_command(job() + " --resume auto --max-epochs 1", dir);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
  EXPECT_TRUE(fs::exists(dir / "run" / "model.h5"));
}

// A stop signal while no step boundary comes (the rank hangs in its step,
// DLSCALE_HANG_AT): the run ends collective-timeout later with code 143 and
// its message, and the checkpoint it wrote before still resumes. It used to
// wait for the boundary for ever, since the flag is read only there.
TEST_F(FailingRank, StopSignalWithoutAStepBoundaryEndsTheRunAtTheTimeout) {
  const std::string train = dlscale_binary() + " train " + (dir / "long.ini").string() + " --output " +
                            (dir / "run").string() + " --checkpoint-frequency 100 --checkpoint-frequency-unit iteration";
  pid_t rank = start("env DLSCALE_HANG_AT=0:151 " + train + " --collective-timeout 3");
  ASSERT_GT(rank, 0);
  // Iteration 150 is in metrics.jsonl: the rank is in step 151, which never ends.
  for (int i = 0; i < 600 && read_file(dir / "run" / "metrics.jsonl").find("\"iteration\":150,") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_NE(read_file(dir / "run" / "metrics.jsonl").find("\"iteration\":150,"), std::string::npos)
      << read_file(dir / "out.txt");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(rank, SIGTERM);
  int status = 0;
  const double seconds = wait_for_exit(rank, 30, status);
  ASSERT_GE(seconds, 0) << "still running 30 s after SIGTERM: " << read_file(dir / "out.txt");
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 143) << read_file(dir / "out.txt");
  EXPECT_GE(seconds, 2.5);  // it waited for the boundary first
  EXPECT_NE(read_file(dir / "out.txt").find("no step boundary was reached within collective-timeout"),
            std::string::npos)
      << read_file(dir / "out.txt");
  EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));

  RunResult resumed = run_command(train + " --resume auto --max-epochs 1", dir);
  EXPECT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("resumed from"), std::string::npos) << resumed.out;
  EXPECT_NE(resumed.out.find("ckpt-100.h5"), std::string::npos) << resumed.out;
}

// A mistake on one rank only (its config file is missing on its node): that
// rank must end the job with its message. It used to print nothing (only
// rank 0 printed usage errors) and wait in MPI_Finalize while the others
// waited in job setup, for ever.
TEST_F(FailingRank, UsageErrorOnOneRankEndsTheJobWithItsMessage) {
  const auto t0 = Clock::now();
  const std::string rank = dlscale_binary() + " train ", output = " --output " + (dir / "run").string();
  RunResult r = run_command("timeout 120 mpirun --oversubscribe -n 1 " + rank + (dir / "long.ini").string() + output +
                                " : -n 1 " + rank + (dir / "missing.ini").string() + output,
                            dir);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_LT(seconds, 60);
  EXPECT_NE(r.err.find("dlscale: rank 1 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find((dir / "missing.ini").string()), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));
  EXPECT_TRUE(job_processes().empty()) << "processes left behind";
}

// A checkpoint write longer than collective-timeout is not a hang: the other
// ranks know rank 0 is writing and wait up to checkpoint-timeout instead.
TEST_F(FailingRank, SlowCheckpointWriteDoesNotEndAHealthyJob) {
  RunResult r = run_command("DLSCALE_CHECKPOINT_DELAY=6 timeout 120 " + job() +
                                " --max-epochs 1 --checkpoint-frequency 100 --checkpoint-frequency-unit iteration"
                                " --collective-timeout 2",
                            dir);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(dir / "run" / "model.h5"));
}

// ...but a write that never ends still ends the job, naming what it waited for.
TEST_F(FailingRank, CheckpointWriteBeyondCheckpointTimeoutEndsTheJob) {
  RunResult r = run_command("DLSCALE_CHECKPOINT_DELAY=1000 timeout 120 " + job() +
                                " --max-epochs 1 --checkpoint-frequency 100 --checkpoint-frequency-unit iteration"
                                " --collective-timeout 2 --checkpoint-timeout 4",
                            dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_NE(r.err.find("in the wait for rank 0 to write a checkpoint at iteration 100"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(checkpoint-timeout = 4 s)"), std::string::npos) << r.err;
  EXPECT_TRUE(job_processes().empty()) << "processes left behind";
}

// A rank that never reaches start-up (it hangs before its heartbeat and job
// setup): the others' wait in job setup is bounded by collective-timeout, and
// the line names the rank.
TEST_F(FailingRank, RankThatNeverReachesStartUpEndsTheJobNamingIt) {
  const auto t0 = Clock::now();
  RunResult r = run_command("DLSCALE_HANG_AT=1:0 timeout 120 mpirun -n 2 --oversubscribe " + dlscale_binary() +
                                " train " + (dir / "long.ini").string() + " --output " + (dir / "run").string() +
                                " --collective-timeout 4",
                            dir);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 60);
  EXPECT_NE(r.err.find("in an allgather at job setup"), std::string::npos) << r.err;
  // Before job setup's exchange no rank knows another's host, and the run
  // directory does not exist yet: rank 0 says what it knows.
  EXPECT_NE(r.err.find("dlscale: lost ranks: rank 1 sent no heartbeat; rank 0 waits in an allgather #"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(job_processes().empty()) << "processes left behind";
}

// Idle ranks (parallel-auto with the GPUs elsewhere; DLSCALE_IDLE_RANKS on a
// machine without GPUs) wait as long as the computing ranks train. With one
// computing rank no other rank's watchdog watches it: the idle rank's wait,
// bounded by the computing rank's heartbeat, ends the job and names it.
class IdleRank : public FailingRank {
 protected:
  RunResult run_job(const std::string& env, const std::string& options) const {
    return run_command(env + " DLSCALE_IDLE_RANKS=1 timeout 120 mpirun -n 2 --oversubscribe " + dlscale_binary() +
                           " train " + (dir / "long.ini").string() + " --output " + (dir / "run").string() + " " +
                           options,
                       dir);
  }
  // The job ended, not timeout, within a minute, with the idle rank's error
  // and the lost-ranks line in stderr, log.txt and run/lost-rank.
  void expect_ended_naming_rank_0(const RunResult& r, double seconds, const std::string& state) const {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.exit_code, 124) << "the job hung until timeout killed it";
    EXPECT_LT(seconds, 60);
    EXPECT_TRUE(std::regex_search(r.err, std::regex("dlscale: rank 1 \\([^)]*\\): error: idle rank 1 waited for the "
                                                    "computing ranks, and rank 0 \\([^)]*\\) " + state)))
        << r.err;
    EXPECT_NE(r.err.find("(collective-timeout = 4 s)"), std::string::npos) << r.err;
    const std::string marker = read_file(dir / "run" / "lost-rank");
    EXPECT_NE(marker.find("rank 0 ("), std::string::npos) << marker;
    EXPECT_NE(marker.find("idle rank 1 waits for the computing ranks"), std::string::npos) << marker;
    EXPECT_NE(read_file(dir / "run" / "log.txt").find("dlscale: lost ranks: rank 0 ("), std::string::npos);
    EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));
    EXPECT_TRUE(job_processes().empty()) << "processes left behind";
  }
};

TEST_F(IdleRank, EndsTheJobWhenTheComputingRankHangs) {
  const auto t0 = Clock::now();
  RunResult r = run_job("DLSCALE_HANG_AT=0:3000", "--collective-timeout 4");
  expect_ended_naming_rank_0(r, std::chrono::duration<double>(Clock::now() - t0).count(),
                             "is alive but has not advanced for [0-9]+ s outside any collective");
}

TEST_F(IdleRank, EndsTheJobWhenTheComputingRankIsStopped) {
  const auto t0 = Clock::now();
  RunResult r = run_job("DLSCALE_SIGNAL_AT=0:8000:" + std::to_string(SIGSTOP), "--collective-timeout 4");
  expect_ended_naming_rank_0(r, std::chrono::duration<double>(Clock::now() - t0).count(), "silent for [0-9]+ s");
}

// A healthy run with an idle rank finishes, though a checkpoint write takes
// longer than collective-timeout: the write has checkpoint-timeout.
TEST_F(IdleRank, AHealthyRunWithLongCheckpointWritesFinishes) {
  RunResult r = run_job("DLSCALE_CHECKPOINT_DELAY=9",
                        "--max-epochs 1 --checkpoint-frequency 100 --checkpoint-frequency-unit iteration "
                        "--collective-timeout 4 --checkpoint-timeout 60");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(dir / "run" / "model.h5"));
  EXPECT_FALSE(fs::exists(dir / "run" / "lost-rank"));
}

}  // namespace
}  // namespace dlscale::testing
