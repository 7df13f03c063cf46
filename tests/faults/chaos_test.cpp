// The chaos test: a small network trains on 2 ranks in deterministic mode
// while faults hit it at iterations drawn from a fixed seed (a rank killed
// with SIGKILL, SIGTERM preemption, the newest checkpoint damaged on disk, a
// checkpoint write failing on a full disk, a rank stalled past the collective
// timeout). After each fault the job is started again with --resume auto, as
// Slurm's requeue would. The final model.h5 must be bitwise that of an
// uninterrupted run; nothing may be lost but the iterations since the last
// checkpoint. Prints "faults injected N, survived N, lost iterations M".
#include <algorithm>
#include <map>
#include <random>

#include "launch/cli_helpers.h"

namespace dlscale::testing {
namespace {

constexpr int kIterations = 250;       // 2 epochs of 125 global batches
constexpr int kCheckpointEvery = 5;    // iterations
constexpr int kFaultsPerKind = 5;

enum class Fault { kill, terminate, damaged_checkpoint, disk_full, stall };
const char* name(Fault f) {
  switch (f) {
    case Fault::kill: return "SIGKILL to a rank";
    case Fault::terminate: return "SIGTERM preemption";
    case Fault::damaged_checkpoint: return "newest checkpoint damaged";
    case Fault::disk_full: return "disk full while writing a checkpoint";
    case Fault::stall: return "rank stalled past the collective timeout";
  }
  return "?";
}

class Chaos : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir("chaos");
    write_dataset((dir / "train").string(), separable_images(2000, 4, 7), 2);
    std::ofstream(dir / "chaos.ini") << "train-data = " << (dir / "train").string() << "\n"
                                     << "input = 1x8x8\nlayer = dense units=32\nlayer = relu\n"
                                        "layer = dropout rate=0.2\nlayer = dense units=4\nlayer = softmax\n"
                                        "solver = adam\nmax-epochs = 2\nmini-batch-size = 16\nshuffle = every-epoch\n"
                                        "threads = 1\nverbose-frequency = 1\ndeterministic = true\nseed = 5\n"
                                        "checkpoint-frequency = " << kCheckpointEvery << "\n"
                                     << "checkpoint-frequency-unit = iteration\ncheckpoint-keep = 2\n"
                                        "collective-timeout = 5\n";
  }
  RunResult train(const std::string& run, const std::string& env, const std::string& extra = "") const {
    return run_command(env + " timeout 120 mpirun -n 2 --oversubscribe " + dlscale_binary() + " train " +
                           (dir / "chaos.ini").string() + " --output " + (dir / run).string() + " " + extra,
                       dir);
  }
  // Iteration of the newest checkpoint file in the run, 0 when none.
  int newest_checkpoint(const fs::path& folder, fs::path* path = nullptr) const {
    int newest = 0;
    if (!fs::exists(folder)) return 0;
    for (auto& e : fs::directory_iterator(folder)) {
      int it = 0;
      if (std::sscanf(e.path().filename().c_str(), "ckpt-%d.h5", &it) == 1 && e.path().extension() == ".h5" &&
          it > newest) {
        newest = it;
        if (path) *path = e.path();
      }
    }
    return newest;
  }
  // Processes whose command line names this run (mpirun and its ranks).
  bool processes_left(const std::string& run) const {
    RunResult r = run_command("pgrep -f -- '[-]-output " + (dir / run).string() + "'", dir);
    return !r.out.empty();
  }
  fs::path dir;
};

TEST_F(Chaos, FaultsAtRandomIterationsLoseNothing) {
  RunResult whole = train("whole", "");
  ASSERT_EQ(whole.exit_code, 0) << whole.out << whole.err;
  const std::string reference = read_file(dir / "whole" / "model.h5");
  ASSERT_FALSE(reference.empty());
  const std::uintmax_t checkpoint_bytes = fs::file_size(dir / "whole" / "checkpoints" / "ckpt-250.h5");

  std::vector<Fault> plan;
  for (Fault f : {Fault::kill, Fault::terminate, Fault::damaged_checkpoint, Fault::disk_full, Fault::stall})
    plan.insert(plan.end(), kFaultsPerKind, f);
  std::mt19937 random(20261203);
  std::shuffle(plan.begin(), plan.end(), random);

  const fs::path checkpoints = dir / "chaos" / "checkpoints";
  int injected = 0, survived = 0;
  std::map<Fault, int> count;
  bool finished = false;
  for (Fault fault : plan) {
    const int from = newest_checkpoint(checkpoints);
    // Far enough past the checkpoint resumed from that there is work to lose.
    const int at = from + std::uniform_int_distribution<int>(2, 3 * kCheckpointEvery)(random);
    if (at >= kIterations) break;
    const int rank = std::uniform_int_distribution<int>(0, 1)(random);
    std::string env, expect;
    int expected_code = -1;  // -1: any failure
    switch (fault) {
      case Fault::kill:
        env = "DLSCALE_SIGNAL_AT=" + std::to_string(rank) + ":" + std::to_string(at) + ":9";
        break;
      case Fault::terminate:
        env = "DLSCALE_SIGNAL_AT=" + std::to_string(rank) + ":" + std::to_string(at) + ":15";
        expected_code = 3;
        break;
      case Fault::damaged_checkpoint:
        // The job stops cleanly at `at`; then its newest checkpoint is damaged on disk.
        env = "DLSCALE_STOP_AT=" + std::to_string(at);
        expected_code = 3;
        break;
      case Fault::disk_full: {
        // Rank 0's next checkpoint write runs out of space half-way.
        env = "LD_PRELOAD=" + std::string(FAULT_SHIM) + " DLSCALE_FAULT_RANK=0 DLSCALE_FAULT_ENOSPC=ckpt-:" +
              std::to_string(checkpoint_bytes / 2);
        expect = "ckpt-";
        break;
      }
      case Fault::stall:
        env = "DLSCALE_HANG_AT=" + std::to_string(rank) + ":" + std::to_string(at);
        expect = "no answer from the other ranks";
        break;
    }
    RunResult r = train("chaos", env, "--resume auto");
    ++injected, ++count[fault];
    const bool failed_as_expected =
        expected_code >= 0 ? r.exit_code == expected_code : r.exit_code != 0 && r.exit_code != 124;
    EXPECT_TRUE(failed_as_expected) << name(fault) << " at " << at << ": exit " << r.exit_code << "\n" << r.err;
    if (!expect.empty()) EXPECT_NE(r.err.find(expect), std::string::npos) << name(fault) << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "chaos" / "model.h5")) << name(fault) << " at " << at << " finished the run";
    EXPECT_FALSE(processes_left("chaos")) << name(fault) << ": processes left behind";
    fs::path newest;
    const int kept = newest_checkpoint(checkpoints, &newest);
    EXPECT_GE(kept, from) << name(fault) << ": a checkpoint was lost";
    if (fault == Fault::damaged_checkpoint && kept > 0) {
      std::ofstream(newest, std::ios::in | std::ios::out | std::ios::binary).write("damaged!", 8);
      fs::resize_file(newest, fs::file_size(newest) / 2);
    }
    for (auto& e : fs::directory_iterator(checkpoints))
      EXPECT_NE(e.path().extension(), ".tmp") << "a half-written checkpoint was left: " << e.path();
    if (failed_as_expected) ++survived;
    if (::testing::Test::HasFailure()) break;
  }
  RunResult last = train("chaos", "", "--resume auto");
  ASSERT_EQ(last.exit_code, 0) << last.out << last.err;
  finished = read_file(dir / "chaos" / "model.h5") == reference;
  EXPECT_TRUE(finished) << "model.h5 after the faults differs from the uninterrupted run's";

  // Every logged iteration row beyond the 250 of one run is work done twice.
  int rows = 0;
  std::ifstream metrics(dir / "chaos" / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) rows += line.find("\"type\":\"iteration\"") != std::string::npos;
  std::printf("faults injected %d, survived %d, lost iterations %d\n", injected, finished ? survived : 0,
              rows - kIterations);
  for (auto& [fault, n] : count) std::printf("  %d x %s\n", n, name(fault));
  EXPECT_GE(injected, 20);
  for (auto& [fault, n] : count) EXPECT_GE(n, 3) << name(fault);
}

}  // namespace
}  // namespace dlscale::testing
