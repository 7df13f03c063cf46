// Preemption on the real one-node Slurm cluster (slurm/test-cluster.sh,
// started by the CTest fixture, or here if it is not running): a submitted
// job gets USR1 the way `#SBATCH --signal=USR1@N` sends it (to the job
// steps, not the batch shell), its rank stops at a checkpoint, leaves the
// preemption marker and exits 3, the script requeues the job on the marker,
// the next start resumes, and the job finishes on its own with bitwise the
// weights and figures of the same job run without interruption beside it.
#include <regex>

#include "io/model_file.h"
#include "job_helpers.h"

namespace dlscale::testing {
namespace {

std::string g_cluster_error;  // why the cluster is not usable, with its logs; empty when it is

// Long enough to be interrupted after its first checkpoint however fast the
// machine (several seconds of training), with checkpoints every 50
// iterations; one thread and deterministic, so two runs of it are bitwise equal.
const char* kLongMlp =
    "input = 1x8x8\n"
    "layer = dense units=512\n"
    "layer = relu\n"
    "layer = dense units=512\n"
    "layer = relu\n"
    "layer = dense units=4\n"
    "layer = softmax\n"
    "solver = adam\n"
    "initial-learn-rate = 0.002\n"
    "learn-rate-schedule = cosine\n"
    "mini-batch-size = 16\n"
    "verbose-frequency = 50\n"
    "checkpoint-frequency = 50\n"
    "checkpoint-frequency-unit = iteration\n"
    "checkpoint-keep = 2\n"
    "seed = 7\n"
    "threads = 1\n"
    "deterministic = true\n";
constexpr int kEpochs = 60;  // 40 iterations each: 2400 in all

class SlurmPreemption : public JobsTest {
 protected:
  static void SetUpTestSuite() { g_cluster_error = start_test_cluster(); }
  void SetUp() override {
    ASSERT_TRUE(g_cluster_error.empty()) << g_cluster_error;
    JobsTest::SetUp();
    std::ofstream(dir / "long.ini") << kLongMlp << "max-epochs = " << kEpochs << "\n"
                                    << "train-data = " << (dir / "train").string() << "\n"
                                    << "test-data = " << (dir / "test").string() << "\n";
  }
  std::string profiles_text() override {
    return "default = test\n[test]\ntype = slurm\npartition = debug\ntime = 10\njob-root = " + (dir / "jobs").string() +
           "\n";
  }
  std::string submit_long(const std::string& name) {
    RunResult r = dlscale("submit " + (dir / "long.ini").string() + " --name " + name);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::istringstream line(r.out);
    std::string word, folder;
    line >> word >> folder;
    return folder;
  }
  std::string slurm(const std::string& command) {
    RunResult r = run_command(command, dir);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.out << r.err;
    return r.out;
  }
  bool has_checkpoint(const std::string& folder) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir / "jobs" / folder / "run" / "checkpoints", ec))
      if (e.path().extension() == ".h5") return true;
    return false;
  }
};

std::vector<std::vector<double>> weights(const fs::path& model) {
  std::vector<std::vector<double>> all;
  auto net = load_model(model.string());
  for (auto& [name, t] : net->named_tensors()) {
    std::vector<double> v(t->numel());
    for (std::int64_t i = 0; i < t->numel(); ++i) v[i] = t->at(i);
    all.push_back(std::move(v));
  }
  return all;
}

TEST_F(SlurmPreemption, SignalledJobRequeuesItselfAndEndsAsAnUninterruptedOne) {
  const std::string whole = submit_long("whole"), preempted = submit_long("preempted");
  const std::string id = record(preempted)["slurm_job_id"];
  const fs::path job_dir = dir / "jobs" / preempted;
  const std::string script = read_file(job_dir / "job.sh");
  EXPECT_NE(script.find("#SBATCH --signal=USR1@120\n"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --requeue\n"), std::string::npos) << script;

  // Once it has checkpointed it is well into its training: preempt it.
  auto start = std::chrono::steady_clock::now();
  while (!has_checkpoint(preempted) && std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(has_checkpoint(preempted)) << "no checkpoint within 60 s\n" << read_file(job_dir / "log.txt");
  // What --signal=USR1@N does at N seconds before the time limit: USR1 to the job's steps.
  slurm("scancel --signal=USR1 " + id);

  auto j = wait_for(preempted, {"done", "failed", "cancelled"}, 200);
  const std::string log = read_file(job_dir / "log.txt");
  ASSERT_EQ(j["state"], "done") << j.dump() << "\n" << log;
  // It stopped at a checkpoint, requeued itself, and the next start resumed there.
  std::smatch stopped, resumed;
  ASSERT_TRUE(std::regex_search(log, stopped, std::regex("stopped by a signal at iteration ([0-9]+)"))) << log;
  // The script requeued on the marker rank 0 left, and printed what it holds.
  EXPECT_NE(log.find("dlscale: preempted (iteration " + stopped[1].str() + " checkpoint " +
                     (job_dir / "run" / "checkpoints").string() + "/ckpt-" + stopped[1].str() +
                     ".h5); requeueing Slurm job " + id),
            std::string::npos)
      << log;
  EXPECT_FALSE(fs::exists(job_dir / "run" / "preempted")) << "the next start left the marker in place";
  EXPECT_NE(log.find("started again after a requeue (restart 1)"), std::string::npos) << log;
  ASSERT_TRUE(std::regex_search(log, resumed, std::regex("resumed from \\S+ckpt-([0-9]+)\\.h5 at iteration ([0-9]+)")))
      << log;
  EXPECT_EQ(resumed[2].str(), stopped[1].str());
  const int stop_iteration = std::stoi(stopped[1].str());
  EXPECT_GT(stop_iteration, 0);
  EXPECT_LT(stop_iteration, kEpochs * 40) << "the signal came after the training had ended";
  // Slurm saw one job that restarted once and completed.
  const std::string show = slurm("scontrol show job " + id);
  EXPECT_NE(show.find("JobState=COMPLETED"), std::string::npos) << show;
  EXPECT_NE(show.find("Restarts=1"), std::string::npos) << show;
  EXPECT_EQ(read_record(job_dir.string(), "exit-status"), "0");

  RunResult f = dlscale("fetch " + preempted);
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("\"test_accuracy\""), std::string::npos) << f.out;

  // The same job without the interruption ends with the same weights and figures, bit for bit.
  auto w = wait_for(whole, {"done", "failed", "cancelled"}, 200);
  ASSERT_EQ(w["state"], "done") << w.dump() << read_file(dir / "jobs" / whole / "log.txt");
  auto a = summary(whole), b = summary(preempted);
  EXPECT_EQ(b["iterations"], kEpochs * 40);
  EXPECT_EQ(a["iterations"], b["iterations"]);
  EXPECT_EQ(a["test_accuracy"].get<double>(), b["test_accuracy"].get<double>());
  EXPECT_EQ(a["test_loss"].get<double>(), b["test_loss"].get<double>());
  EXPECT_TRUE(weights(dir / "jobs" / whole / "run" / "model.h5") == weights(job_dir / "run" / "model.h5"))
      << "the preempted job's final weights differ from the uninterrupted job's";
  EXPECT_EQ(read_file(dir / "jobs" / whole / "log.txt").find("requeue"), std::string::npos);
}

}  // namespace
}  // namespace dlscale::testing
