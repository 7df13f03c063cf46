// dlscale report: one self-contained report.html per run directory or sweep
// folder. The charts are inline SVG written here (no JavaScript, fonts or
// URLs), so the page opens anywhere, also on a cluster node without network.
//   run:   loss, accuracy and learning rate against iteration; samples/s and
//          device utilization per rank (RUN/telemetry.jsonl); summary and config
//   sweep: every trial's training loss and validation accuracy on one chart
//          each, and the results table (JOB/results.csv)
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launch/svg_chart.h"

namespace dlscale {

// One "type":"iteration" or "type":"validation" line of metrics.jsonl; NaN
// for a null figure and for a missing learn_rate or time_s (validations have
// no learn_rate).
struct MetricPoint {
  int epoch = 0;
  long long iteration = 0;
  double loss = 0, accuracy = 0, learn_rate = 0, time_s = 0;
};

// One rank in one telemetry.jsonl line; NaN where the line says null.
struct RankPoint {
  int rank = 0;
  std::string host, device;
  double samples_per_second = 0, utilization_pct = 0;
};

struct TelemetryPoint {
  long long iteration = 0;
  double time_s = 0;
  std::vector<RankPoint> ranks;
};

using ReportTable = std::vector<std::vector<std::string>>;  // first row: the header

struct RunData {
  std::string path, name;  // name: the folder's name, or "trial 0: option=value, ..." in a sweep
  std::vector<MetricPoint> iterations, validations;
  bool has_telemetry = false;
  std::vector<TelemetryPoint> telemetry;
  ReportTable summary;  // key, value rows of summary.json; empty when the run has not finished
  std::vector<std::pair<std::string, std::string>> config;  // config.ini's option = value lines
};

struct SweepData {
  std::string path, name;
  std::vector<RunData> trials;  // the trials that have a metrics.jsonl, in trial order
  ReportTable results;          // results.csv; empty before the sweep has ended
};

// RUN holds metrics.jsonl; a sweep folder holds trials/<i>/.
bool is_run_directory(const std::string& path);
bool is_sweep_folder(const std::string& path);

// Malformed lines are an Error naming the file and the line number.
RunData read_run(const std::string& path);
SweepData read_sweep(const std::string& path);

std::string run_report_html(const RunData& run);
std::string sweep_report_html(const SweepData& sweep);

// Reads PATH (a run directory, a job folder with run/, or a sweep folder) and
// writes its page to `output` (default PATH/report.html) through a temporary
// file and a rename. Returns the path written.
std::string write_report(const std::string& path, const std::string& output = "");

}  // namespace dlscale
