// Stragglers in a real training under mpirun -n 3: with rank 1 made slow
// (DLSCALE_SLOW_RANK=1:50, a 50 ms sleep in each of its steps' compute)
// summary.json, the log and telemetry.jsonl name rank 1 and this host with
// what the job waits for it; with every rank slowed alike (the same run
// length and step time, so the same number of windows) nobody is named. The
// other ranks' step time is as long as rank 1's (they wait for it in the
// gradient all-reduce), so naming it depends on leaving that wait out.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "runtime/monitoring/telemetry.h"
#include "runtime/training/trainer.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

constexpr double kSleepS = 0.050;

std::string host_name() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

class Straggler : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_root() / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
      fs::create_directories(dir);
      write_dataset((dir / "train").string(), separable_images(480, 4, 7), 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // Windows of 0.25 s (about 5 steps) instead of 1 s keep the run short;
    // the 20 ms floor is far above what scheduling noise on a shared machine
    // adds to a step of this tiny network, and far below the 50 ms sleep.
    setenv("DLSCALE_TELEMETRY_WINDOW", "0.25", 1);
    setenv("DLSCALE_STRAGGLER_THRESHOLD", "10:20:3", 1);
  }
  void TearDown() override {
    unsetenv("DLSCALE_TELEMETRY_WINDOW");
    unsetenv("DLSCALE_STRAGGLER_THRESHOLD");
    unsetenv("DLSCALE_SLOW_RANK");
  }
  // Three epochs of 20 steps (24 samples, 8 per rank), about 3 s at 50 ms a step.
  nlohmann::json train(const std::string& run, const char* slow) {
    TrainingOptions o;
    o.train_data = (dir / "train").string();
    o.network.input_shape = {1, 8, 8};
    o.network.layer_lines = {"dense units=16", "relu", "dense units=4", "softmax"};
    o.max_epochs = 3;
    o.mini_batch_size = 24;
    o.verbose = false;
    o.verbose_frequency = 2;
    o.threads = 1;
    o.execution_environment = "parallel-cpu";
    o.config_text = "straggler test";
    o.output = (dir / run).string();
    setenv("DLSCALE_SLOW_RANK", slow, 1);
    Communicator comm;
    trainnet(o, comm);
    std::ifstream in(dir / run / "summary.json");
    return comm.rank() == 0 ? nlohmann::json::parse(in) : nlohmann::json();
  }
  std::vector<TelemetryRecord> telemetry(const std::string& run) const {
    std::vector<TelemetryRecord> lines;
    std::ifstream in(dir / run / "telemetry.jsonl");
    for (std::string l; std::getline(in, l);) lines.push_back(parse_telemetry_line(l));
    return lines;
  }
  fs::path dir;
};

TEST_F(Straggler, ASlowRankIsNamedWithWhatTheJobWaitsForIt) {
  const nlohmann::json summary = train("slow", "1:50");
  if (summary.is_null()) return;  // rank 0 checks what rank 0 wrote
  ASSERT_TRUE(summary["stragglers"].is_array()) << summary.dump(2);
  ASSERT_EQ(summary["stragglers"].size(), 1u) << summary.dump(2);
  const nlohmann::json& s = summary["stragglers"][0];
  EXPECT_EQ(s["rank"], 1) << s.dump();
  EXPECT_EQ(s["host"], host_name()) << s.dump();
  EXPECT_FALSE(s["whole_node"].get<bool>()) << "all three ranks share this host";
  EXPECT_FALSE(s["recovered"].get<bool>()) << s.dump();
  EXPECT_GT(s["steps"].get<int>(), 0) << s.dump();
  // Sleeping adds 50 ms to each of its steps; the others' compute of this
  // network is a few ms, so the job waits most of each step for rank 1.
  EXPECT_GE(s["mean_excess_s"].get<double>(), 0.020) << s.dump();
  EXPECT_GT(s["share_of_step"].get<double>(), 0.3) << s.dump();
  EXPECT_LE(s["share_of_step"].get<double>(), 1.0) << s.dump();

  const std::string log = read_file(dir / "slow" / "log.txt");
  EXPECT_NE(log.find("dlscale: straggler: rank 1 (" + host_name() + ") computes "), std::string::npos) << log;
  EXPECT_NE(log.find("longer than the median rank; the job waits "), std::string::npos) << log;

  // Only rank 1's compute time holds the sleep (the others spend it waiting
  // in the all-reduce), and the later lines name it.
  const auto lines = telemetry("slow");
  ASSERT_FALSE(lines.empty());
  const TelemetryRecord& last = lines.back();
  ASSERT_EQ(last.ranks.size(), 3u);
  EXPECT_GE(last.ranks[1].compute_time_s, kSleepS);
  EXPECT_LT(last.ranks[0].compute_time_s, last.ranks[1].compute_time_s - 0.020);
  EXPECT_LT(last.ranks[2].compute_time_s, last.ranks[1].compute_time_s - 0.020);
  ASSERT_EQ(last.stragglers.size(), 1u);
  EXPECT_EQ(last.stragglers[0].rank, 1);
  EXPECT_GE(last.stragglers[0].excess_s, 0.020);
}

TEST_F(Straggler, RanksSlowedAlikeNameNobody) {
  const nlohmann::json summary = train("alike", "*:50");
  if (summary.is_null()) return;
  ASSERT_TRUE(summary["stragglers"].is_array()) << summary.dump(2);
  EXPECT_TRUE(summary["stragglers"].empty()) << summary.dump(2);
  EXPECT_EQ(read_file(dir / "alike" / "log.txt").find("straggler"), std::string::npos);
  const auto lines = telemetry("alike");
  ASSERT_GE(lines.size(), 4u) << "as many windows as the slowed run: enough to name a straggler";
  for (const auto& line : lines) {
    EXPECT_TRUE(line.stragglers.empty()) << "iteration " << line.iteration;
    for (const auto& r : line.ranks) EXPECT_GE(r.compute_time_s, kSleepS) << "rank " << r.rank;
  }
}

}  // namespace
}  // namespace dlscale::testing
