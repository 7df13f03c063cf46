// Per-rank resource figures of a running training: every computing rank
// samples its step time, throughput, utilization and memory; rank 0 gathers
// them and appends one line per sample to RUN/telemetry.jsonl, which
// `dlscale monitor` (and report generators) read while the job runs:
//   {"time_s": 12.3, "iteration": 50, "ranks": [{"rank": 0, "host": "n1", "device": "cpu",
//    "step_time_s": 0.021, "compute_time_s": 0.018, "samples_per_second": 6100.0,
//    "utilization_pct": 97.0, "memory_mib": 310.5, "device_memory_mib": null}, ...],
//    "stragglers": []}
// Rank 0 also looks for stragglers in each line's figures (stragglers.h),
// and with 3 or more hosts probes its link to each other host per line and
// names a slow one (link_stragglers.h): "links": [{"host", "upload_s",
// "download_s"}], "link_stragglers": [{"host", "ranks", "cost_s",
// "step_time_s", "probe_s", "fastest_probe_s"}].
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runtime/parallel/communicator.h"
#include "runtime/monitoring/link_stragglers.h"
#include "runtime/monitoring/stragglers.h"
#include "runtime/parallel/job_setup.h"

namespace dlscale {

// This process, from /proc/self (0 where it cannot be read).
double resident_memory_mib();       // VmRSS: what the process holds now
double peak_resident_memory_mib();  // VmHWM: the most it ever held (getrusage where /proc is missing)
double process_cpu_seconds();       // user + system time of all its threads

// A GPU's utilization and used memory through NVML, loaded with dlopen at run
// time (no link dependency). nullopt without libnvidia-ml.so.1 or that device.
// Untested in this project's CI, which has no GPU.
struct DeviceFigures {
  double utilization_pct = 0, memory_used_mib = 0;
};
std::optional<DeviceFigures> nvml_device_figures(int nvml_index);
// NVML counts physical devices; CUDA_VISIBLE_DEVICES renumbers them.
int nvml_index(const std::string& visible_devices, int gpu_index);

struct RankSample {
  int rank = 0;
  std::string host, device;
  // Over the sample's window (Telemetry): the time since the previous line.
  double step_time_s = 0;         // mean over the window's steps
  double compute_time_s = 0;      // step time less the time blocked waiting for other ranks, mean per step
  double samples_per_second = 0;  // this rank's samples over those steps' time
  double utilization_pct = 0;     // CPU: process CPU time / wall time / threads; GPU: NVML (its own period)
  double memory_mib = 0;          // VmRSS
  std::optional<double> device_memory_mib;  // NVML used memory on GPU ranks
};

struct TelemetryRecord {
  double time_s = 0;  // since the start of the job
  std::int64_t iteration = 0;
  std::vector<RankSample> ranks;
  std::vector<Straggler> stragglers;  // named as of this line (Straggler::step_s: the job's step time)
  std::vector<LinkWindow> links;      // rank 0's probes of the other hosts (3 or more hosts)
  std::vector<LinkStraggler> link_stragglers;
};

std::string telemetry_line(const TelemetryRecord& record);  // one JSON object, no newline
// Throws dlscale::Error for a line that is not such an object.
TelemetryRecord parse_telemetry_line(const std::string& line);

// The trainer's side: cheap bookkeeping every step, and a sample when the
// trainer asks (at logged iterations, epoch ends, and when the interval timer
// of any rank fired, which the trainer learns from its per-step flag
// all-reduce).
//
// Each line's figures cover a window of at least min_window_s seconds on
// every rank, so that a rank descheduled for a moment on a shared machine
// does not read as idle: a sample asked for sooner writes no line and the
// window stays open, its steps and CPU time adding up until a later sample
// closes it. One small all-reduce of the window lengths decides, so every
// rank agrees; the gather of the figures happens only when a line is
// written. The exception is the last window of a finished run, written
// whatever its length by gather_peak_memory(), so a run shorter than the
// window still leaves a line.
//
// The minimum window: DLSCALE_TELEMETRY_WINDOW (seconds, 0: a line at every
// sample, as tests that look at each epoch end need), else 1 s. Throws
// dlscale::Error for a value that is not a number of seconds from 0 to 3600.
double default_telemetry_window_s();

class Telemetry {
 public:
  // file: RUN/telemetry.jsonl, written by rank 0 only (writer), appended to
  // when a run resumes. The timer fires interval_s after the window opened
  // (never before min_window_s).
  Telemetry(Communicator& comm, const JobSetup& job, const std::string& file, bool writer, bool append,
            double interval_s = 5, double min_window_s = default_telemetry_window_s());
  static constexpr double kMinWindowS = 1.0;  // without DLSCALE_TELEMETRY_WINDOW

  // A step lasts from the end of the previous one (so waiting for data
  // counts) to the end of its update: logging, validation and checkpoints
  // in between are not step time.
  // wait_s: the part of the step blocked waiting for the other ranks
  // (the gradient all-reduce's exposed wait), left out of compute time.
  void step_done(std::int64_t local_samples, double wait_s = 0);
  // Rank 0: where the straggler lines go (the run's log); the stragglers
  // named during the run so far.
  void on_notice(std::function<void(const std::string&)> say) { say_ = std::move(say); }
  std::vector<StragglerReport> stragglers() const { return detector_.reports(); }
  std::vector<LinkStragglerReport> link_stragglers() const { return link_detector_.reports(); }
  // What each rank all-reduces per step (its gradient bytes), for the cost of a slow link.
  void set_reduce_bytes(std::int64_t bytes) { link_detector_.set_reduce_bytes(bytes); }
  static constexpr std::size_t kLinkProbeBytes = 256 * 1024;
  void step_over() { last_step_end_ = Clock::now(); }
  bool timer_due() const { return seconds(window_start_) >= std::max(interval_s_, min_window_s_); }
  // Collective over the computing ranks; once per iteration at most. Writes
  // a line when every rank's window is at least min_window_s long.
  void sample(double time_s, std::int64_t iteration);
  // Collective, at the end of a finished run: writes the open window as of
  // the last sample asked for, if that sample wrote no line; then every
  // rank's VmHWM in MiB on rank 0 (empty elsewhere).
  std::vector<double> gather_peak_memory();

 private:
  using Clock = std::chrono::steady_clock;
  static double seconds(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
  // This rank's figures over the open window: step time, samples/s,
  // utilization, memory, device memory (NaN: none), window length, compute
  // time per step, steps.
  using Figures = std::array<double, 8>;
  Figures figures() const;
  // Gathers the pending figures, rank 0 writes the line; a new window opens.
  void publish();

  Communicator& comm_;
  std::vector<int> world_ranks_;  // computing rank → job rank
  const JobSetup& job_;
  double interval_s_, min_window_s_;
  int threads_ = 1;
  std::optional<int> gpu_;  // NVML index on GPU ranks
  std::ofstream out_;
  Clock::time_point window_start_ = Clock::now(), last_step_end_ = Clock::now();
  double cpu_at_window_start_ = process_cpu_seconds();
  double step_seconds_ = 0, wait_seconds_ = 0;
  std::int64_t steps_ = 0, samples_ = 0, last_iteration_ = -1;
  // The last sample asked for, while it wrote no line.
  std::optional<Figures> pending_;
  double pending_time_s_ = 0;
  std::int64_t pending_iteration_ = 0;
  StragglerDetector detector_{straggler_thresholds_from_environment()};
  // Hosts of the computing ranks, in their order, when a link probe can name
  // a slow link (3 or more hosts, CPU ranks: NCCL's waits are not measured).
  std::vector<std::string> probe_hosts_;
  LinkStragglerDetector link_detector_{straggler_thresholds_from_environment(), kLinkProbeBytes};
  std::function<void(const std::string&)> say_;
};

// Marks the end of a step however the step's function returns.
class StepScope {
 public:
  explicit StepScope(Telemetry& t) : t_(t) {}
  ~StepScope() { t_.step_over(); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  Telemetry& t_;
};

}  // namespace dlscale
