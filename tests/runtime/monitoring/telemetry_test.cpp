// Telemetry under mpirun -n 2: the /proc readers measure what the process
// does, a record survives telemetry.jsonl's JSON line, Telemetry gathers
// both ranks' step figures into one line on rank 0, once per iteration, and
// a line's figures cover its whole window, however many samples were asked
// for within it.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "expect_error.h"
#include "runtime/monitoring/telemetry.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

TEST(TelemetryProc, ResidentMemoryFollowsTouchedPages) {
  const double before = resident_memory_mib();
  ASSERT_GT(before, 1.0) << "VmRSS not read from /proc/self/status";
  std::vector<char> block(64 << 20);
  std::memset(block.data(), 1, block.size());  // pages count once written
  const double during = resident_memory_mib();
  EXPECT_GT(during - before, 60.0);
  EXPECT_GE(peak_resident_memory_mib(), during - 0.5);  // HWM is never below what is held
  volatile char keep = block[12345];
  (void)keep;
}

// On a shared machine a busy loop gets what the scheduler gives it: the test
// asks for 0.2 s of CPU time (within 30 s) and that it never runs ahead of the clock.
TEST(TelemetryProc, CpuSecondsCountBusyTime) {
  const double c0 = process_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  auto wall = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  volatile double x = 0;
  while (process_cpu_seconds() - c0 < 0.2 && wall() < 30)
    for (int i = 0; i < 100000; ++i) x = x + std::sqrt(x + 1);
  const double used = process_cpu_seconds() - c0;
  EXPECT_GE(used, 0.2) << "CPU time did not advance while busy for " << wall() << " s";
  EXPECT_LE(used, wall() * 1.05 + 0.02);  // one busy thread: at most the wall time
}

TEST(TelemetryNvml, IndexFollowsCudaVisibleDevices) {
  EXPECT_EQ(nvml_index("2,3", 1), 3);
  EXPECT_EQ(nvml_index("", 0), 0);
  EXPECT_EQ(nvml_index("GPU-5d1c", 0), 0);  // a UUID: kept as the CUDA index
  EXPECT_EQ(nvml_index("1", 4), 4);
}

TEST(TelemetryLine, RoundTripsWithNullDeviceMemory) {
  TelemetryRecord r{12.3, 50, {}};
  RankSample cpu;
  cpu.rank = 0, cpu.host = "n1", cpu.device = "cpu", cpu.step_time_s = 0.021, cpu.samples_per_second = 6100,
  cpu.utilization_pct = 97, cpu.memory_mib = 310.5, cpu.compute_time_s = 0.018;
  RankSample gpu = cpu;
  gpu.rank = 1, gpu.host = "n2", gpu.device = "gpu:0", gpu.device_memory_mib = 2048.5;
  r.ranks = {cpu, gpu};
  r.stragglers = {{1, "n2", 0.0042, 0.25, 0.021, true}};
  const std::string line = telemetry_line(r);
  EXPECT_EQ(line.find('\n'), std::string::npos);
  // The documented layout: report generators read these keys.
  EXPECT_EQ(line.rfind("{\"time_s\":12.3,\"iteration\":50,\"ranks\":[{\"rank\":0,\"host\":\"n1\",\"device\":\"cpu\","
                       "\"step_time_s\":0.021,\"compute_time_s\":0.018,\"samples_per_second\":6100.0,"
                       "\"utilization_pct\":97.0,"
                       "\"memory_mib\":310.5,\"device_memory_mib\":null}",
                       0),
            0u)
      << line;
  TelemetryRecord back = parse_telemetry_line(line);
  EXPECT_DOUBLE_EQ(back.time_s, 12.3);
  EXPECT_EQ(back.iteration, 50);
  ASSERT_EQ(back.ranks.size(), 2u);
  EXPECT_EQ(back.ranks[1].host, "n2");
  EXPECT_EQ(back.ranks[1].device, "gpu:0");
  EXPECT_FALSE(back.ranks[0].device_memory_mib.has_value());
  ASSERT_TRUE(back.ranks[1].device_memory_mib.has_value());
  EXPECT_DOUBLE_EQ(*back.ranks[1].device_memory_mib, 2048.5);
  EXPECT_DOUBLE_EQ(back.ranks[0].step_time_s, 0.021);
  EXPECT_DOUBLE_EQ(back.ranks[0].compute_time_s, 0.018);
  EXPECT_NE(line.find(",\"stragglers\":[{\"rank\":1,\"host\":\"n2\",\"whole_node\":true,\"excess_s\":0.0042,"
                      "\"excess_pct\":25.0,\"step_time_s\":0.021}]}"),
            std::string::npos)
      << line;
  ASSERT_EQ(back.stragglers.size(), 1u);
  EXPECT_EQ(back.stragglers[0].rank, 1);
  EXPECT_EQ(back.stragglers[0].host, "n2");
  EXPECT_TRUE(back.stragglers[0].whole_node);
  EXPECT_DOUBLE_EQ(back.stragglers[0].excess_s, 0.0042);
  EXPECT_DOUBLE_EQ(back.stragglers[0].excess_ratio, 0.25);
  EXPECT_DOUBLE_EQ(back.stragglers[0].step_s, 0.021);
}

// A line written before compute time and stragglers were recorded still reads.
TEST(TelemetryLine, OlderLinesWithoutComputeTimeRead) {
  const TelemetryRecord r = parse_telemetry_line(
      "{\"time_s\":1.0,\"iteration\":5,\"ranks\":[{\"rank\":0,\"host\":\"n1\",\"device\":\"cpu\","
      "\"step_time_s\":0.03,\"samples_per_second\":100.0,\"utilization_pct\":50.0,\"memory_mib\":10.0,"
      "\"device_memory_mib\":null}]}");
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(r.ranks[0].compute_time_s, 0.03);
  EXPECT_TRUE(r.stragglers.empty());
}

TEST(TelemetryLine, MalformedLineIsAnError) {
  expect_error([] { parse_telemetry_line("{\"time_s\": 1, \"iteration\""); }, "not a telemetry record");
  expect_error([] { parse_telemetry_line("{\"time_s\": 1, \"iteration\": 2}"); }, "not a telemetry record");
}

TEST(TelemetryWindow, DefaultIsOneSecondUnlessTheEnvironmentSaysOtherwise) {
  unsetenv("DLSCALE_TELEMETRY_WINDOW");
  EXPECT_EQ(default_telemetry_window_s(), 1.0);
  setenv("DLSCALE_TELEMETRY_WINDOW", "0", 1);
  EXPECT_EQ(default_telemetry_window_s(), 0.0);
  setenv("DLSCALE_TELEMETRY_WINDOW", "2.5", 1);
  EXPECT_EQ(default_telemetry_window_s(), 2.5);
  for (const char* bad : {"x", "1s", "-1", "nan", "1e9"}) {
    setenv("DLSCALE_TELEMETRY_WINDOW", bad, 1);
    expect_error([] { default_telemetry_window_s(); }, "DLSCALE_TELEMETRY_WINDOW=" + std::string(bad) + " is not");
  }
  unsetenv("DLSCALE_TELEMETRY_WINDOW");
}

// A job of two CPU ranks on hosts h0 and h1, one thread each.
JobSetup two_cpu_ranks() {
  JobSetup job;
  for (int r = 0; r < 2; ++r) {
    RankResources res;
    res.host = "h" + std::to_string(r);
    job.ranks.push_back(res);
    ExecutionPlan p;
    p.environment = "parallel-cpu", p.device = "cpu";
    job.plan.ranks.push_back(p);
    job.threads.push_back(1);
  }
  return job;
}

// Every line of a telemetry file.
std::vector<TelemetryRecord> read_telemetry(const fs::path& file) {
  std::ifstream in(file);
  std::vector<TelemetryRecord> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(parse_telemetry_line(l));
  return lines;
}

// No minimum window here: every sample writes its line.
TEST(TelemetryGather, OneLinePerSampledIterationWithEveryRank) {
  Communicator comm;
  ASSERT_EQ(comm.size(), 2) << "run under mpirun -n 2";
  const fs::path file = scratch_root() / "telemetry_gather.jsonl";
  JobSetup job = two_cpu_ranks();
  {
    Telemetry t(comm, job, file.string(), comm.rank() == 0, false, 0.2, 0);
    EXPECT_FALSE(t.timer_due());
    // Rank 1's steps take twice as long: its figures must come back as its own.
    const int step_ms = comm.rank() == 0 ? 20 : 40;
    for (int step = 0; step < 5; ++step) {
      std::this_thread::sleep_for(std::chrono::milliseconds(step_ms));
      t.step_done(8);
      t.step_over();
    }
    t.sample(1.5, 5);
    t.sample(1.6, 5);  // the same iteration again: no second line
    EXPECT_FALSE(t.timer_due());
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    EXPECT_TRUE(t.timer_due());
    t.step_done(8);
    t.sample(2.0, 6);
    const std::vector<double> peak = t.gather_peak_memory();
    if (comm.rank() == 0) {
      ASSERT_EQ(peak.size(), 2u);
      EXPECT_GT(peak[0], 1.0);
      EXPECT_GT(peak[1], 1.0);
    } else {
      EXPECT_TRUE(peak.empty());
    }
  }
  comm.barrier();
  if (comm.rank() != 0) return;
  const std::vector<TelemetryRecord> lines = read_telemetry(file);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].iteration, 5);
  EXPECT_EQ(lines[1].iteration, 6);
  const TelemetryRecord& r = lines[0];
  ASSERT_EQ(r.ranks.size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const RankSample& s = r.ranks[k];
    EXPECT_EQ(s.rank, k);
    EXPECT_EQ(s.host, "h" + std::to_string(k));
    EXPECT_EQ(s.device, "cpu");
    const double expected = k == 0 ? 0.020 : 0.040;
    EXPECT_GE(s.step_time_s, expected * 0.95);
    EXPECT_LT(s.step_time_s, expected + 0.05);  // sleeps overrun on a loaded machine, never underrun
    EXPECT_NEAR(s.samples_per_second, 8 / s.step_time_s, 8 / s.step_time_s * 0.01);
    EXPECT_GT(s.memory_mib, 1.0);
    EXPECT_GE(s.utilization_pct, 0.0);
    EXPECT_LT(s.utilization_pct, 60.0);  // mostly asleep
    EXPECT_FALSE(s.device_memory_mib.has_value());
  }
}

// Samples asked for within the minimum window (an hour here) write nothing:
// the window stays open, and the end of the run writes it as one line whose
// step time and utilization cover every step and all the CPU time since the
// start, not only what followed the last sample asked for.
TEST(TelemetryWindow, SamplesWithinTheWindowAddUpToOneLine) {
  Communicator comm;
  ASSERT_EQ(comm.size(), 2) << "run under mpirun -n 2";
  const fs::path file = scratch_root() / "telemetry_window.jsonl";
  JobSetup job = two_cpu_ranks();
  const auto t0 = std::chrono::steady_clock::now();
  double wall_at_most = 0;  // covers the line's window
  {
    Telemetry t(comm, job, file.string(), comm.rank() == 0, false, 3600, 3600);
    auto steps = [&](int n, int ms) {
      for (int step = 0; step < n; ++step) {
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        t.step_done(8);
        t.step_over();
      }
    };
    // 0.2 s of CPU time first (a busy loop), then mostly asleep.
    const double c0 = process_cpu_seconds();
    volatile double x = 0;
    while (process_cpu_seconds() - c0 < 0.2)
      for (int i = 0; i < 100000; ++i) x = x + std::sqrt(x + 1);
    t.step_over();  // the busy loop was not a step
    steps(3, 60);
    t.sample(0.5, 3);
    steps(3, 20);
    t.sample(0.6, 6);
    EXPECT_FALSE(t.timer_due());
    comm.barrier();
    EXPECT_FALSE(fs::exists(file) && fs::file_size(file) > 0) << "a sample within the window wrote a line";
    wall_at_most = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.gather_peak_memory();  // the end of the run: the open window is written
  }
  comm.barrier();
  const std::vector<TelemetryRecord> lines = read_telemetry(file);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].iteration, 6);  // as of the last sample asked for
  EXPECT_DOUBLE_EQ(lines[0].time_s, 0.6);
  ASSERT_EQ(lines[0].ranks.size(), 2u);
  const RankSample& mine = lines[0].ranks[comm.rank()];
  // Six steps, three of 60 ms and three of 20 ms: a mean of 40 ms.
  EXPECT_GE(mine.step_time_s, 0.040 * 0.95);
  EXPECT_LT(mine.step_time_s, 0.040 + 0.05);  // sleeps overrun on a loaded machine, never underrun
  EXPECT_NEAR(mine.samples_per_second, 8 / mine.step_time_s, 8 / mine.step_time_s * 0.01);
  // At least the busy loop's 0.2 s of CPU over at most the time this rank
  // has measured since before the window opened (one thread).
  EXPECT_GE(mine.utilization_pct, 0.2 / wall_at_most * 100 - 0.1) << "wall " << wall_at_most << " s";
}

}  // namespace
}  // namespace dlscale::testing
