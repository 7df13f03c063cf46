// dlscale monitor end to end: a real 2-rank mpirun training in the
// background shows both ranks with plausible figures; a monitor started
// beside a run exits by itself when the run finishes; a hand-built Slurm job
// folder and sweep trial folder are found, with each rank's compute time and
// the straggler the newest line names; and what is not a run says so.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_helpers.h"
#include "runtime/monitoring/telemetry.h"
#include "slurm/job_folder.h"

namespace dlscale::testing {
namespace {

using Clock = std::chrono::steady_clock;

// One table row of `dlscale monitor`, split at white space.
struct Row {
  int rank = -1;
  std::string host, device, device_memory, straggler;
  double util = 0, memory = 0, step_ms = 0, compute_ms = 0, samples_per_second = 0, age = 0;
};

// The rows of the last table in the output (lines after the last RANK header).
std::vector<Row> last_table(const std::string& out) {
  std::vector<Row> rows;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("RANK", 0) == 0) {
      rows.clear();
      continue;
    }
    std::istringstream f(line);
    Row r;
    if (f >> r.rank >> r.host >> r.device >> r.util >> r.memory >> r.device_memory >> r.step_ms >> r.compute_ms >>
        r.samples_per_second >> r.straggler >> r.age)
      rows.push_back(r);
  }
  return rows;
}

class Monitor : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void write_config(int epochs, int samples) {
    write_dataset((dir / "train").string(), separable_images(samples, 4, 1), 2);
    std::ofstream(dir / "job.ini") << "train-data = " << (dir / "train").string() << "\n"
                                   << "input = 1x8x8\nlayer = dense units=64\nlayer = relu\n"
                                      "layer = dense units=4\nlayer = softmax\n"
                                   << "max-epochs = " << epochs << "\nmini-batch-size = 16\n"
                                   << "verbose-frequency = 20\nthreads = 1\n";
  }
  // mpirun -n 2 training in the background; its output goes to out.txt.
  pid_t start_job() const {
    pid_t pid = fork();
    if (pid == 0) {
      std::string command = "exec mpirun -n 2 --oversubscribe " + dlscale_binary() + " train " +
                            (dir / "job.ini").string() + " --output " + (dir / "run").string() + " >" +
                            (dir / "out.txt").string() + " 2>&1";
      execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  }
  bool wait_for(const fs::path& file, std::size_t lines, double seconds) const {
    const auto t0 = Clock::now();
    while (Clock::now() - t0 < std::chrono::duration<double>(seconds)) {
      if (!fs::exists(file)) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      std::ifstream in(file);
      std::size_t n = 0;
      for (std::string l; std::getline(in, l);) ++n;
      if (n >= lines) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  static int stop(pid_t pid, int signal) {
    kill(pid, signal);
    int status = 0;
    for (int i = 0; i < 600 && waitpid(pid, &status, WNOHANG) == 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (waitpid(pid, &status, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    return status;
  }
  RunResult monitor(const std::string& args) const {
    return run_command("timeout 120 " + dlscale_binary() + " monitor " + args, dir);
  }
  fs::path dir;
};

std::string host_name() {
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  return host;
}

TEST_F(Monitor, ShowsBothRanksOfARunningJob) {
  write_config(1000, 4000);
  pid_t job = start_job();
  ASSERT_GT(job, 0);
  // Three lines, each over a window of at least Telemetry::kMinWindowS: the
  // first includes the start; later ones are steady.
  const bool sampled = wait_for(dir / "run" / "telemetry.jsonl", 3, 120);
  RunResult r = sampled ? monitor((dir / "run").string() + " --once") : RunResult{};
  const int status = stop(job, SIGUSR1);  // mpirun forwards it: the ranks checkpoint and exit 3
  ASSERT_TRUE(sampled) << read_file(dir / "out.txt");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 3) << read_file(dir / "out.txt");

  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find((dir / "run").string() + ": iteration "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("run finished"), std::string::npos) << r.out;
  std::vector<Row> rows = last_table(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (int k = 0; k < 2; ++k) {
    const Row& row = rows[k];
    SCOPED_TRACE("rank " + std::to_string(k) + "\n" + r.out);
    EXPECT_EQ(row.rank, k);
    EXPECT_EQ(row.host, host_name());
    EXPECT_EQ(row.device, "cpu");
    EXPECT_EQ(row.device_memory, "-");  // no GPU: no device memory
    // One thread each, two ranks on a shared machine: busy, never far above
    // one core. Measured over at least a second, not over the 20 steps
    // (~0.2 s) between logged rows, in which a rank that the scheduler held
    // back once read 3%.
    EXPECT_GT(row.util, 5.0);
    EXPECT_LT(row.util, 400.0);
    EXPECT_GT(row.memory, 5.0);  // MPI, HDF5 and BLAS alone hold more than this
    EXPECT_LT(row.memory, 4000.0);
    EXPECT_GT(row.step_ms, 0.0);
    EXPECT_LT(row.step_ms, 2000.0);  // a 64-unit MLP on 8 samples per rank
    // A rank's throughput is its 8 samples per step over its step time.
    EXPECT_NEAR(row.samples_per_second, 8 / (row.step_ms / 1000), 8 / (row.step_ms / 1000) * 0.05 + 1);
    EXPECT_LT(row.age, 30.0);
  }
  // Every line of the file names both ranks.
  std::ifstream in(dir / "run" / "telemetry.jsonl");
  std::int64_t previous = 0;
  for (std::string line; std::getline(in, line);) {
    TelemetryRecord t = parse_telemetry_line(line);
    ASSERT_EQ(t.ranks.size(), 2u) << line;
    EXPECT_EQ(t.ranks[1].rank, 1);
    EXPECT_GT(t.iteration, previous);
    previous = t.iteration;
  }
}

TEST_F(Monitor, ExitsWhenTheRunFinishes) {
  write_config(8, 2000);
  pid_t job = start_job();
  ASSERT_GT(job, 0);
  ASSERT_TRUE(wait_for(dir / "run" / "metrics.jsonl", 0, 60));  // the run directory exists
  RunResult r = monitor((dir / "run").string() + " --interval 0.2");
  int status = 0;
  waitpid(job, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << read_file(dir / "out.txt");
  // mpirun's stdout is a file: no progress bar, although each rank's stdout is Open MPI's pty.
  EXPECT_EQ(read_file(dir / "out.txt").find("ETA"), std::string::npos) << read_file(dir / "out.txt");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("run finished: " + (dir / "run" / "summary.json").string() + " written"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("peak memory (MiB)"), std::string::npos) << r.out;
  EXPECT_EQ(last_table(r.out).size(), 2u) << r.out;
  EXPECT_EQ(r.out.find('\033'), std::string::npos) << "no terminal codes when stdout is a file";

  std::ifstream in(dir / "run" / "summary.json");
  nlohmann::json s = nlohmann::json::parse(in);
  ASSERT_EQ(s["peak_rss_mib_per_rank"].size(), 2u) << s.dump();
  const double a = s["peak_rss_mib_per_rank"][0].get<double>(), b = s["peak_rss_mib_per_rank"][1].get<double>();
  EXPECT_GT(std::min(a, b), 5.0);
  EXPECT_DOUBLE_EQ(s["peak_rss_mib"].get<double>(), std::max(a, b));
}

// Two lines as two ranks on two nodes would write them; the second is the newest.
void write_telemetry(const fs::path& run) {
  fs::create_directories(run);
  std::ofstream(run / "metrics.jsonl") << "";
  TelemetryRecord r{3.0, 10, {}};
  RankSample cpu;
  cpu.rank = 0, cpu.host = "n1", cpu.device = "cpu", cpu.step_time_s = 0.5, cpu.samples_per_second = 64,
  cpu.utilization_pct = 91, cpu.memory_mib = 300;
  RankSample gpu = cpu;
  gpu.rank = 1, gpu.host = "n2", gpu.device = "gpu:0", gpu.device_memory_mib = 2048.5, gpu.utilization_pct = 55;
  r.ranks = {cpu, gpu};
  std::ofstream out(run / "telemetry.jsonl");
  out << telemetry_line(r) << "\n";
  r.iteration = 20, r.time_s = 6.5, r.ranks[0].step_time_s = 0.0125, r.ranks[1].memory_mib = 812.25;
  r.ranks[0].compute_time_s = 0.004, r.ranks[1].compute_time_s = 0.012;
  r.stragglers = {{1, "n2", 0.008, 2.0, 0.0125, true}};  // rank 1 computes 12 ms, rank 0 4 ms
  out << telemetry_line(r) << "\n";
  out << "{\"time_s\": 7.0, \"iter";  // a line being written: not read
}

TEST_F(Monitor, ReadsASlurmJobFolder) {
  JobRecord job;
  job.dir = (dir / "jobs" / "mlp-20260101-120000").string();
  job.folder = "mlp-20260101-120000", job.name = "mlp", job.type = "slurm", job.slurm_id = "4242";
  job.tasks = 2, job.nodes = 2;
  fs::create_directories(job.dir);
  write_job_record(job);
  write_telemetry(fs::path(job.dir) / "run");

  RunResult r = monitor(job.dir + " --once");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(job.dir + "/run: iteration 20, 6.5 s into the run, 2 rank(s)"), std::string::npos) << r.out;
  std::vector<Row> rows = last_table(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(rows[0].host, "n1");
  EXPECT_EQ(rows[0].device, "cpu");
  EXPECT_DOUBLE_EQ(rows[0].step_ms, 12.5);
  EXPECT_EQ(rows[0].device_memory, "-");
  EXPECT_EQ(rows[1].host, "n2");
  EXPECT_EQ(rows[1].device, "gpu:0");
  EXPECT_DOUBLE_EQ(rows[1].util, 55);
  EXPECT_DOUBLE_EQ(rows[1].memory, 812.3);  // one decimal
  EXPECT_EQ(rows[1].device_memory, "2048.5");
  EXPECT_DOUBLE_EQ(rows[0].compute_ms, 4);
  EXPECT_DOUBLE_EQ(rows[1].compute_ms, 12);
  EXPECT_EQ(rows[0].straggler, "-");
  EXPECT_EQ(rows[1].straggler, "yes");
  EXPECT_NE(r.out.find("\nstraggler: node n2 (rank 1) computes 200% longer than the median rank; the job waits "
                       "8.0 ms of each 12.5 ms step for it\n"),
            std::string::npos)
      << r.out;

  // The job ended without a summary: the monitor says so instead of waiting.
  write_record(job.dir, "exit-status", "1");
  r = monitor(job.dir + " --interval 0.1");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("ended with exit status 1 without writing summary.json"), std::string::npos) << r.err;

  std::ofstream(fs::path(job.dir) / "run" / "summary.json") << "{\"wall_time_s\": 9.5}\n";
  r = monitor(job.dir + " --interval 0.1");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("run finished: " + job.dir + "/run/summary.json written, wall time (s) 9.5"), std::string::npos)
      << r.out;
}

TEST_F(Monitor, ASweepNeedsOneTrialFolder) {
  JobRecord job;
  job.dir = (dir / "sweep-1").string();
  job.folder = "sweep-1", job.type = "slurm", job.array_size = 3;
  fs::create_directories(job.dir);
  write_job_record(job);
  RunResult r = monitor(job.dir + " --once");
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("is a sweep of 3 trials; monitor one trial, e.g. " + job.dir + "/trials/0"), std::string::npos)
      << r.err;
  write_telemetry(fs::path(job.dir) / "trials" / "1" / "run");
  r = monitor(job.dir + "/trials/1 --once");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(last_table(r.out).size(), 2u) << r.out;
}

TEST_F(Monitor, WhatIsNotARunIsAnError) {
  RunResult r = monitor((dir / "nowhere").string() + " --once");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("nowhere does not exist"), std::string::npos) << r.err;

  fs::create_directories(dir / "other");
  std::ofstream(dir / "other" / "notes.txt") << "x";
  r = monitor((dir / "other").string() + " --once");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is neither a run directory (metrics.jsonl, telemetry.jsonl) nor a job folder (job.json)"),
            std::string::npos)
      << r.err;

  r = monitor((dir / "other").string() + " --interval 0");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--interval must be a positive number"), std::string::npos) << r.err;
}

TEST_F(Monitor, ARunWithoutTelemetryTimesOutWaiting) {
  fs::create_directories(dir / "run");
  std::ofstream(dir / "run" / "metrics.jsonl") << "";
  const auto t0 = Clock::now();
  RunResult r = monitor((dir / "run").string() + " --once --wait 1 --interval 0.2");
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("waiting for the first sample in " + (dir / "run" / "telemetry.jsonl").string()),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.err.find("no telemetry in " + (dir / "run").string() + " after 1 s"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 30);
}

}  // namespace
}  // namespace dlscale::testing
