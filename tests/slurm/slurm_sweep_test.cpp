// A 4-trial sweep on the real one-node Slurm cluster (slurm/test-cluster.sh,
// started by the CTest fixture, or here if it is not running): one job array
// with a %K throttle, waited for, and the ranked table.
#include "sweep_helpers.h"

namespace dlscale::testing {
namespace {

std::string g_cluster_error;  // why the cluster is not usable, with its logs; empty when it is

class SlurmSweep : public SweepTest {
 protected:
  static void SetUpTestSuite() { g_cluster_error = start_test_cluster(); }
  void SetUp() override {
    ASSERT_TRUE(g_cluster_error.empty()) << g_cluster_error;
    SweepTest::SetUp();
  }
  std::string profiles_text() override {
    const std::string root = "job-root = " + (dir / "jobs").string() + "\n";
    return "default = test\n[local]\n" + root + "[test]\ntype = slurm\npartition = debug\ntime = 10\n" + root;
  }
};

TEST_F(SlurmSweep, GridOfFourTrialsAsOneJobArray) {
  sweep_file(std::string(kGrid2x2) + "metric = test_loss\nparallel = 2\n");
  RunResult r;
  std::string folder = sweep("", r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string script = read_file(dir / "jobs" / folder / "job.sh");
  EXPECT_NE(script.find("#SBATCH --array=0-3%2\n"), std::string::npos) << script;
  EXPECT_NE(r.out.find("Slurm job array "), std::string::npos) << r.out;
  expect_results(folder, r, 4, "test_loss");
}

TEST_F(SlurmSweep, FailingTrialIsInTheTable) {
  sweep_file("grid.initial-learn-rate = -1, 0.01\nmetric = test_accuracy\n");
  RunResult r;
  std::string folder = sweep("", r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_results(folder, r, 2, "test_accuracy", 1);
}

}  // namespace
}  // namespace dlscale::testing
