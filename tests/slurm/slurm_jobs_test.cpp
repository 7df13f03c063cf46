// Batch jobs on a real one-node Slurm cluster (slurm/test-cluster.sh, started
// by a CTest fixture, or here if it is not running): submit -> jobs -> fetch,
// a 2-rank MPI job under srun, cancel, a rank that dies ending its job, a job
// that queues while the cluster is full, a failing job, data staging, and the hostile job name. A cluster that
// cannot start is a failure with the daemon logs, never a skip.
#include <signal.h>

#include "job_helpers.h"
#include "slurm/profiles.h"
#include "slurm/jobs.h"

namespace dlscale::testing {
namespace {

std::string g_cluster_error;  // why the cluster is not usable, with its logs; empty when it is

class SlurmJobs : public JobsTest {
 protected:
  static void SetUpTestSuite() { g_cluster_error = start_test_cluster(); }
  void SetUp() override {
    ASSERT_TRUE(g_cluster_error.empty()) << g_cluster_error;
    JobsTest::SetUp();
  }
  std::string profiles_text() override {
    const std::string root = "job-root = " + (dir / "jobs").string() + "\n";
    return "default = test\n[local]\n" + root + "[test]\ntype = slurm\npartition = debug\ntime = 10\n" + root +
           "[tiny]\ntype = slurm\npartition = tiny\n" + root + "[staged]\ntype = slurm\nstage-data = true\nstage-dir = " +
           (dir / "node-local").string() + "\n" + root;
  }
  // A Slurm command's output (SLURM_CONF points at the test cluster).
  std::string slurm(const std::string& command) {
    RunResult r = run_command(command, dir);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    return r.out;
  }
  void expect_done_with_summary(const std::string& folder) {
    auto j = wait_for(folder, {"done", "failed", "cancelled"});
    ASSERT_EQ(j["state"], "done") << j.dump() << read_file(dir / "jobs" / folder / "log.txt");
    RunResult f = dlscale("fetch " + folder);
    ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
    EXPECT_NE(f.out.find("\"test_accuracy\""), std::string::npos) << f.out;
    EXPECT_GT(summary(folder)["test_accuracy"].get<double>(), 0.9);
  }
};

TEST_F(SlurmJobs, SubmittedJobFinishesAndFetchReturnsItsSummary) {
  std::string folder = submit("--name mlp");
  const std::string id = record(folder)["slurm_job_id"];
  ASSERT_FALSE(id.empty());
  expect_done_with_summary(folder);
  EXPECT_EQ(summary(folder)["world_size"], 1);
  // The job is found by its Slurm id too, and jobs shows its progress.
  auto j = job(id);
  EXPECT_EQ(j["job"], folder);
  EXPECT_EQ(j["progress"]["epoch"], 3);
  EXPECT_EQ(read_record((dir / "jobs" / folder).string(), "slurm-state"), "COMPLETED");
  // What rank 0 printed went to the job folder.
  EXPECT_NE(read_file(dir / "jobs" / folder / "log.txt").find("test accuracy"), std::string::npos);
}

// The real data: Debian's Fashion-MNIST test split (10k images) sharded and
// trained for one epoch by a submitted job; fetch returns its test accuracy.
// (Training and testing on the same split: this checks the job, not generalization.)
TEST_F(SlurmJobs, FashionMnistJobFinishesAndFetchReturnsItsAccuracy) {
  const std::string src = "/usr/share/datasets/fashion-mnist/";
  RunResult shard = dlscale("shard --images " + src + "t10k-images-idx3-ubyte.gz --labels " + src +
                            "t10k-labels-idx1-ubyte.gz --output " + (dir / "fmnist").string() + " --shards 2");
  ASSERT_EQ(shard.exit_code, 0) << shard.err;
  std::ofstream(dir / "fmnist.ini") << "train-data = fmnist\ntest-data = fmnist\ninput = 1x28x28\n"
                                       "layer = dense units=64\nlayer = relu\nlayer = dense units=10\n"
                                       "layer = softmax\nsolver = adam\ninitial-learn-rate = 0.002\n"
                                       "max-epochs = 1\nmini-batch-size = 64\n";
  std::ofstream(dir / "profiles.ini", std::ios::app)
      << "[fm]\ntype = slurm\npartition = debug\ndata-root = " << dir.string() << "\njob-root = " << (dir / "jobs").string()
      << "\n";
  RunResult r = dlscale("submit " + (dir / "fmnist.ini").string() + " --profile fm --name fashion-mnist");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::istringstream line(r.out);
  std::string word, folder;
  line >> word >> folder;
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  ASSERT_EQ(j["state"], "done") << j.dump() << read_file(dir / "jobs" / folder / "log.txt");
  RunResult f = dlscale("fetch " + folder);
  ASSERT_EQ(f.exit_code, 0) << f.err;
  EXPECT_NE(f.out.find("\"test_accuracy\""), std::string::npos) << f.out;
  EXPECT_GT(summary(folder)["test_accuracy"].get<double>(), 0.75);
}

TEST_F(SlurmJobs, TwoRankMpiJobUnderSrun) {
  std::string folder = submit("--name mpi --tasks-per-node 2");
  EXPECT_NE(read_file(dir / "jobs" / folder / "job.sh").find("srun --mpi='pmix'"), std::string::npos);
  expect_done_with_summary(folder);
  EXPECT_EQ(summary(folder)["world_size"], 2);
}

TEST_F(SlurmJobs, CancelledJobShowsCancelled) {
  std::string folder = submit("--name long -- --max-epochs 100000");
  const std::string id = record(folder)["slurm_job_id"];
  wait_for(folder, {"running"});
  RunResult c = dlscale("cancel " + id);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("cancelled " + folder + " (Slurm job " + id + ")"), std::string::npos) << c.out;
  // Slurm's own state, not the record cancel wrote: the controller's, then the
  // job-completion file it writes when the job has ended.
  std::string show;
  for (int i = 0; i < 120; ++i) {
    show = slurm("scontrol show job " + id);
    if (show.find("JobState=CANCELLED") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_NE(show.find("JobState=CANCELLED"), std::string::npos) << show;
  const fs::path completions = fs::path(DLSCALE_TEST_CLUSTER_DIR) / "log" / "jobcomp.txt";
  std::string completion;
  for (int i = 0; i < 120 && completion.empty(); ++i) {
    std::istringstream lines(read_file(completions));
    for (std::string line; std::getline(lines, line);)
      if (line.rfind("JobId=" + id + " ", 0) == 0) completion = line;
    if (completion.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_NE(completion.find(" JobState=CANCELLED "), std::string::npos) << completion;
  // dlscale jobs says so from Slurm alone.
  fs::remove(dir / "jobs" / folder / "cancelled");
  EXPECT_EQ(job(folder)["state"], "cancelled");
}

// One rank killed outright (no error message, no MPI_Abort: a crash, the OOM
// killer) while the other waits in an all-reduce with no collective timeout:
// the job ends as a whole, FAILED, instead of waiting for the time limit.
// Under --mpi=pmix Slurm's PMIx plugin aborts the step on such a death by
// itself (seen here: "mpi/pmix_v4: _errhandler ... STEP CANCELLED"), so the
// job ends even without --kill-on-bad-exit=1; the flag, checked in the
// script, covers the other MPI plugins and a rank that exits non-zero
// without MPI noticing.
TEST_F(SlurmJobs, JobEndsAsAWholeWhenOneRankDies) {
  std::string folder = submit("--name crash --tasks-per-node 2 -- --max-epochs 100000 --collective-timeout 0");
  const std::string id = record(folder)["slurm_job_id"];
  EXPECT_NE(read_file(dir / "jobs" / folder / "job.sh").find("srun --mpi='pmix' --kill-on-bad-exit=1 "),
            std::string::npos);
  // Training is under way once rank 0 has logged an iteration.
  auto j = wait_for(folder, {"running"});
  for (int i = 0; i < 240 && !job(folder).contains("progress"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  // scontrol listpids: PID JOBID STEPID LOCALID GLOBALID; rank 1 of step 0.
  std::string rank1;
  std::istringstream lines(slurm("scontrol listpids " + id));
  for (std::string pid, job_id, step, local, global; lines >> pid >> job_id >> step >> local >> global;)
    if (step == "0" && global == "1") rank1 = pid;
  ASSERT_FALSE(rank1.empty()) << slurm("scontrol listpids " + id);
  ASSERT_EQ(kill(std::stoi(rank1), SIGKILL), 0);
  j = wait_for(folder, {"done", "failed", "cancelled"}, 60);
  EXPECT_EQ(j["state"], "failed") << j.dump() << read_file(dir / "jobs" / folder / "log.txt");
  EXPECT_NE(slurm("scontrol show job " + id).find("JobState=FAILED"), std::string::npos);
  EXPECT_EQ(read_file(dir / "jobs" / folder / "run" / "preempted"), "") << "a crash must not read as preempted";
}

TEST_F(SlurmJobs, JobQueuesWhileTheClusterIsFull) {
  // The tiny partition has 2 CPUs: this job takes both.
  std::string blocker = slurm("sbatch --parsable -p tiny -c 2 -o /dev/null --wrap 'sleep 120'");
  blocker = blocker.substr(0, blocker.find_first_of(";\n"));
  for (int i = 0; i < 120 && slurm("squeue -h -j " + blocker + " -o %T").find("RUNNING") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  std::string folder = submit("--profile tiny --name queued");
  std::this_thread::sleep_for(std::chrono::seconds(2));
  auto j = job(folder);
  EXPECT_EQ(j["state"], "queued") << j.dump();
  EXPECT_FALSE(j.contains("progress"));
  slurm("scancel " + blocker);
  expect_done_with_summary(folder);
}

TEST_F(SlurmJobs, FailingJobShowsFailed) {
  std::string folder = submit("--name broken -- --train-data " + (dir / "nowhere").string());
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  EXPECT_EQ(j["state"], "failed") << j.dump();
  EXPECT_EQ(j["detail"], "Slurm: FAILED");
  RunResult f = dlscale("fetch " + folder);
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.out.find("nowhere"), std::string::npos) << f.out;
}

TEST_F(SlurmJobs, DataIsStagedToNodeLocalStorage) {
  std::string folder = submit("--profile staged --name staged");
  const std::string id = record(folder)["slurm_job_id"];
  expect_done_with_summary(folder);
  // The run read the copies, and the copies are gone afterwards.
  const std::string stage = (dir / "node-local" / ("dlscale-" + id)).string();
  std::string config = read_file(dir / "jobs" / folder / "run" / "config.ini");
  EXPECT_NE(config.find("train-data = " + stage + "/train-data\n"), std::string::npos) << config;
  EXPECT_NE(config.find("test-data = " + stage + "/test-data\n"), std::string::npos) << config;
  EXPECT_FALSE(fs::exists(stage));
}

// What a sweep does: one job array, a task per config, through the library.
TEST_F(SlurmJobs, JobArrayRunsOneTaskPerConfig) {
  JobRequest request;
  request.profile = load_profiles((dir / "profiles.ini").string()).select("test");
  request.name = "sweep";
  for (int seed : {1, 2}) {
    const fs::path config = dir / ("seed" + std::to_string(seed) + ".ini");
    std::ofstream(config) << read_file(dir / "mlp.ini") << "seed = " << seed << "\n";
    request.configs.push_back(config.string());
  }
  request.dlscale = dlscale_binary();
  JobRecord submitted = submit_job(request);
  ASSERT_FALSE(submitted.slurm_id.empty());
  EXPECT_EQ(submitted.array_size, 2);
  auto j = wait_for(submitted.folder, {"done", "failed", "cancelled"});
  ASSERT_EQ(j["state"], "done") << j.dump();
  EXPECT_EQ(j["detail"], "2/2 tasks done");
  for (int i = 0; i < 2; ++i) {
    const fs::path trial = dir / "jobs" / submitted.folder / "trials" / std::to_string(i);
    EXPECT_NE(read_file(trial / "run" / "config.ini").find("seed = " + std::to_string(i + 1)), std::string::npos);
    EXPECT_TRUE(fs::exists(trial / "run" / "summary.json"));
    EXPECT_NE(read_file(trial / "log.txt").find("test accuracy"), std::string::npos);
    EXPECT_EQ(read_record(trial.string(), "exit-status"), "0");
  }
  RunResult f = dlscale("fetch " + submitted.slurm_id);
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("task 1: done, test accuracy"), std::string::npos) << f.out;
}

TEST_F(SlurmJobs, HostileNameRunsNothing) {
  fs::remove(kPwned);
  ASSERT_FALSE(fs::exists(kPwned));
  std::string folder = submit("--name " + shell_quote(kHostileName));
  const std::string id = record(folder)["slurm_job_id"];
  // sbatch read the #SBATCH line's quoting as meant: the name is intact.
  std::string show = slurm("scontrol show job " + id);
  EXPECT_NE(show.find(std::string("JobName=") + kHostileName + "\n"), std::string::npos) << show;
  expect_done_with_summary(folder);
  EXPECT_FALSE(fs::exists(kPwned)) << "part of the job name ran as a command";
}

}  // namespace
}  // namespace dlscale::testing
