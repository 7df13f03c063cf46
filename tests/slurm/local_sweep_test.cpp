// Sweeps on the local profile, end to end through the dlscale binary: a 2x2
// grid with a ranked table, a failing trial that does not stop the others,
// random samples, and the sweep file's mistakes.
#include <signal.h>

#include <thread>

#include "sweep_helpers.h"

namespace dlscale::testing {
namespace {

using LocalSweep = SweepTest;

TEST_F(LocalSweep, GridOfFourTrialsGivesARankedTable) {
  sweep_file(std::string(kGrid2x2) + "metric = test_accuracy\nparallel = 2\n");
  RunResult r;
  std::string folder = sweep("", r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_results(folder, r, 4, "test_accuracy");
  // Each trial trained its own values, with one thread (two trials share the CPUs).
  const fs::path trial3 = dir / "jobs" / folder / "trials" / "3" / "run" / "config.ini";
  const std::string config = read_file(trial3);
  EXPECT_NE(config.find("initial-learn-rate = 0.05\n"), std::string::npos) << config;
  EXPECT_NE(config.find("mini-batch-size = 64\n"), std::string::npos) << config;
  EXPECT_NE(config.find("max-epochs = 1\n"), std::string::npos) << config;
  EXPECT_NE(config.find("threads = 1\n"), std::string::npos) << config;
}

// The base config names one checkpoint folder for every trial: each trial
// still checkpoints (and would resume) in a folder of its own inside it.
TEST_F(LocalSweep, TrialsSharingACheckpointPathEachGetTheirOwnFolder) {
  sweep_file("grid.initial-learn-rate = 0.01, 0.05\n");
  std::ofstream(dir / "mlp1.ini", std::ios::app) << "checkpoint-path = " << (dir / "shared-checkpoints").string()
                                                << "\ncheckpoint-frequency = 1\n";
  RunResult r;
  std::string folder = sweep("", r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  std::set<std::string> folders;
  for (int i = 0; i < 2; ++i) {
    const fs::path own = dir / "shared-checkpoints" / folder / "trials" / std::to_string(i);
    folders.insert(own.string());
    EXPECT_TRUE(fs::exists(own / "ckpt-20.h5")) << own << "\n"
                                                << read_file(dir / "jobs" / folder / "trials" / std::to_string(i) / "log.txt");
    const std::string config = read_file(dir / "jobs" / folder / "trials" / std::to_string(i) / "run" / "config.ini");
    EXPECT_NE(config.find("checkpoint-path = " + own.string() + "\n"), std::string::npos) << config;
  }
  EXPECT_EQ(folders.size(), 2u);
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir / "shared-checkpoints", ec))
    EXPECT_TRUE(fs::is_directory(e.path())) << e.path() << ": a trial wrote into the shared folder itself";
}

TEST_F(LocalSweep, FailingTrialIsInTheTableAndTheOthersGoOn) {
  sweep_file("grid.initial-learn-rate = 0.01, -1, 0.05\nmetric = test_loss\n");
  RunResult r;
  std::string folder = sweep("", r);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  expect_results(folder, r, 3, "test_loss", 1);
  EXPECT_NE(read_file(dir / "jobs" / folder / "trials" / "1" / "log.txt").find("initial-learn-rate must be"),
            std::string::npos);
  auto rows = csv_rows(read_file(dir / "jobs" / folder / "results.csv"));
  EXPECT_EQ(rows[3][0], "1");
  EXPECT_EQ(rows[3][1], "-1");
}

TEST_F(LocalSweep, RandomSamplesAreSeededAndDryRunRunsNothing) {
  sweep_file("random.initial-learn-rate = log:0.001:0.1\nrandom.mini-batch-size = 16:64\nsamples = 3\nseed = 7\n");
  RunResult a, b;
  std::string first = sweep("--dry-run", a), second = sweep("--dry-run", b);
  ASSERT_EQ(a.exit_code, 0) << a.out << a.err;
  for (int i = 0; i < 3; ++i) {
    const std::string trial = "trials/" + std::to_string(i) + "/config.ini";
    std::string config = read_file(dir / "jobs" / first / trial);
    EXPECT_EQ(config, read_file(dir / "jobs" / second / trial)) << "the same seed drew other values";
    auto at = config.find("mini-batch-size = ");
    ASSERT_NE(at, std::string::npos) << config;
    int batch = std::stoi(config.substr(at + 18));
    EXPECT_GE(batch, 16);
    EXPECT_LE(batch, 64);
  }
  EXPECT_FALSE(fs::exists(dir / "jobs" / first / "trials" / "0" / "run"));
  EXPECT_FALSE(fs::exists(dir / "jobs" / first / "results.csv"));
}

// A running local sweep stops on `dlscale cancel` (TERM to the sweep
// process) and on Ctrl-C (INT): its running trial is stopped, the next is
// never started, both read cancelled, and the sweep exits 128 + the signal
// after writing the table. The trials train for ever unless stopped.
class LocalSweepStop : public SweepTest {
 protected:
  // Starts the sweep on a thread; returns its job folder once trial 0 runs.
  std::string start_long_sweep() {
    sweep_file("grid.initial-learn-rate = 0.01, 0.02\ngrid.max-epochs = 100000\nparallel = 1\n");
    runner = std::thread([this] { result = dlscale("sweep " + (dir / "sweep.ini").string()); });
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - start < std::chrono::seconds(60)) {
      if (fs::exists(dir / "jobs"))
        for (const auto& entry : fs::directory_iterator(dir / "jobs"))
          if (fs::exists(entry.path() / "trials" / "0" / "run")) return entry.path().filename().string();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "trial 0 of the sweep did not start within 60 s";
    return "";
  }

  void expect_stopped(const std::string& folder, int signal) {
    runner.join();
    EXPECT_EQ(result.exit_code, 128 + signal) << result.out << result.err;
    EXPECT_NE(result.out.find("trial 0 cancelled"), std::string::npos) << result.out;
    EXPECT_EQ(result.out.find("trial 1 started"), std::string::npos) << "the next trial was started: " << result.out;
    const fs::path job_dir = dir / "jobs" / folder;
    EXPECT_FALSE(fs::exists(job_dir / "trials" / "1" / "run"));
    EXPECT_EQ(read_file(job_dir / "trials" / "0" / "exit-status").substr(0, 3), "143") << "trial 0 was not stopped";
    auto rows = csv_rows(read_file(job_dir / "results.csv"));
    ASSERT_EQ(rows.size(), 3u);
    EXPECT_EQ(rows[1].back(), "cancelled");
    EXPECT_EQ(rows[2].back(), "cancelled");
    EXPECT_EQ(job(folder)["state"], "cancelled");
  }

  // A test that failed half-way still stops its sweep before the thread goes.
  void TearDown() override {
    if (!runner.joinable()) return;
    if (fs::exists(dir / "jobs"))
      for (const auto& entry : fs::directory_iterator(dir / "jobs")) {
        auto record = nlohmann::json::parse(read_file(entry.path() / "job.json"));
        if (record.value("pid", 0L) > 0) kill(static_cast<pid_t>(record["pid"].get<long>()), SIGTERM);
      }
    runner.join();
  }

  std::thread runner;
  RunResult result;
};

TEST_F(LocalSweepStop, CancelStopsTheRunningTrialAndStartsNoMore) {
  const std::string folder = start_long_sweep();
  ASSERT_FALSE(folder.empty());
  EXPECT_EQ(job(folder)["state"], "running");
  RunResult c = dlscale("cancel " + folder);
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("cancelled " + folder), std::string::npos) << c.out;
  expect_stopped(folder, SIGTERM);
}

TEST_F(LocalSweepStop, InterruptStopsTheTrialsToo) {
  const std::string folder = start_long_sweep();
  ASSERT_FALSE(folder.empty());
  auto record = nlohmann::json::parse(read_file(dir / "jobs" / folder / "job.json"));
  ASSERT_GT(record["pid"].get<long>(), 0) << "the sweep process is not in job.json";
  kill(static_cast<pid_t>(record["pid"].get<long>()), SIGINT);
  expect_stopped(folder, SIGINT);
}

TEST_F(LocalSweep, MistakesNameTheFileAndKey) {
  auto expect_error = [&](const std::string& lines, const std::string& needle) {
    const std::string path = sweep_file(lines).string();
    RunResult r = dlscale("sweep " + path);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  };
  const std::string file = (dir / "sweep.ini").string();
  expect_error("grid.initial-learn-rate = 0.1\nparalel = 2\n", file + ":4: unknown key 'paralel'");
  expect_error("grid.learn-rat = 0.1\n", file + ":3: unknown key 'grid.learn-rat'");
  expect_error("grid.output = a, b\n", "cannot vary output");
  expect_error("metric = speed\ngrid.seed = 1\n", "metric = 'speed'");
  expect_error("random.momentum = 0.9\n", "expected lo:hi or log:lo:hi");
  expect_error("parallel = 2\n", "nothing to sweep");
  EXPECT_FALSE(fs::exists(dir / "jobs")) << "a refused sweep left a job folder";
}

}  // namespace
}  // namespace dlscale::testing
