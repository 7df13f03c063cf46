// End-to-end helpers for batch-job tests: a scratch folder with a small
// synthetic dataset, an MLP config and a profiles file of the test's own;
// running dlscale submit/jobs/fetch/cancel and waiting for a job's state.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "launch/cli_helpers.h"
#include "slurm/job_folder.h"
#include "slurm/quoting.h"

namespace dlscale::testing {

// Trains in well under a second: 640 8x8 images of 4 classes.
inline const char* kJobMlp =
    "input = 1x8x8\n"
    "layer = dense units=16\n"
    "layer = relu\n"
    "layer = dense units=4\n"
    "layer = softmax\n"
    "solver = adam\n"
    "initial-learn-rate = 0.01\n"
    "max-epochs = 3\n"
    "mini-batch-size = 32\n"
    "verbose-frequency = 5\n"
    "validation-frequency = 1000\n";

class JobsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_dataset((dir / "train").string(), separable_images(640, 4, 1), 2);
    write_dataset((dir / "test").string(), separable_images(200, 4, 2), 1);
    std::ofstream(dir / "mlp.ini") << kJobMlp << "train-data = " << (dir / "train").string() << "\n"
                                   << "test-data = " << (dir / "test").string() << "\n";
    std::ofstream(dir / "profiles.ini") << profiles_text();
    setenv("DLSCALE_PROFILES", (dir / "profiles.ini").string().c_str(), 1);
    unsetenv("DLSCALE_PROFILE");
  }
  // Every profile of the test keeps its jobs in the test's folder.
  virtual std::string profiles_text() { return "[local]\njob-root = " + (dir / "jobs").string() + "\n"; }

  RunResult dlscale(const std::string& args) { return run_command(dlscale_binary() + " " + args, dir); }

  // Submits and returns the job folder name (the second word of the first line).
  std::string submit(const std::string& args) {
    RunResult r = dlscale("submit " + (dir / "mlp.ini").string() + " " + args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::istringstream line(r.out);
    std::string word, folder;
    line >> word >> folder;
    EXPECT_TRUE(word == "submitted" || word == "wrote") << r.out;
    return folder;
  }

  nlohmann::json job(const std::string& key) {
    RunResult r = dlscale("jobs --json " + shell_quote(key));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    try {
      return nlohmann::json::parse(r.out);
    } catch (const std::exception&) {
      ADD_FAILURE() << "dlscale jobs --json printed: " << r.out << r.err;
      return nlohmann::json::object();
    }
  }

  // Polls until the job is in one of `states`; the last jobs --json object.
  nlohmann::json wait_for(const std::string& key, const std::set<std::string>& states, double timeout_s = 90) {
    auto start = std::chrono::steady_clock::now();
    nlohmann::json j;
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < timeout_s) {
      j = job(key);
      if (j.contains("state") && states.count(j["state"].get<std::string>())) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    ADD_FAILURE() << "job " << key << " did not reach the state wanted within " << timeout_s << " s; last: " << j.dump()
                  << "\nlog.txt:\n" << read_file(dir / "jobs" / key / "log.txt");
    return j;
  }

  nlohmann::json record(const std::string& folder) {
    return nlohmann::json::parse(read_file(dir / "jobs" / folder / "job.json"));
  }
  nlohmann::json summary(const std::string& folder) {
    return nlohmann::json::parse(read_file(dir / "jobs" / folder / "run" / "summary.json"));
  }

  fs::path dir;
};

#ifdef DLSCALE_TEST_CLUSTER_DIR
// Starts the one-node test cluster (idempotent: the CTest fixture has usually
// started it) and points Slurm's commands at it. Returns why it is not usable,
// with the daemon logs, or empty.
inline std::string start_test_cluster() {
  const fs::path cluster = DLSCALE_TEST_CLUSTER_DIR;
  fs::create_directories(cluster);
  RunResult r = run_command(std::string(DLSCALE_TEST_CLUSTER_SCRIPT) + " start " + cluster.string(), cluster);
  if (r.exit_code != 0)
    return "the test cluster did not start (" DLSCALE_TEST_CLUSTER_SCRIPT " start " + cluster.string() + "):\n" + r.out +
           r.err;
  setenv("SLURM_CONF", (cluster / "slurm.conf").string().c_str(), 1);
  // Ranks on a node that claims more CPUs than it has: yield instead of spinning.
  setenv("OMPI_MCA_mpi_yield_when_idle", "1", 1);
  return "";
}
#endif

// The hostile job name of the issue, and the file it would create if any
// part of it ran.
inline const char* kHostileName = "'; touch /tmp/pwned #";
inline const char* kPwned = "/tmp/pwned";

}  // namespace dlscale::testing
