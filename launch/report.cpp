// dlscale report (see report.h): reading a run directory or sweep folder, and
// the page: which charts a run or a sweep gets, the summary tables. The
// charts themselves are drawn by launch/svg_chart.
#include "launch/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/hdf5.h"
#include "runtime/core/error.h"

namespace dlscale {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;  // summary.json's keys in the order the trainer wrote them

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// ---- reading --------------------------------------------------------------

// Calls fn(object, line number) for each non-blank line of a JSON-lines file.
template <class Fn>
void for_each_json_line(const fs::path& file, Fn&& fn) {
  std::ifstream in(file);
  if (!in) fail("cannot read " + file.string());
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = file.string() + " line " + std::to_string(number);
    Json j;
    try {
      j = Json::parse(line);
    } catch (const std::exception& e) {
      fail(where + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.is_object()) fail(where + ": expected a JSON object");
    fn(j, where);
  }
}

// A number field; null (a NaN the writer could not spell) reads as NaN.
double number_field(const Json& j, const char* key, const std::string& where, const char* record) {
  auto it = j.find(key);
  if (it != j.end() && it->is_number()) return it->get<double>();
  if (it != j.end() && it->is_null()) return kNaN;
  fail(where + ": " + record + " without a number '" + key + "'");
}

double optional_number(const Json& j, const char* key, const std::string& where, const char* record) {
  return j.contains(key) ? number_field(j, key, where, record) : kNaN;
}

long long integer_field(const Json& j, const char* key, const std::string& where, const char* record) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) fail(where + ": " + record + " without a number '" + key + "'");
  return it->get<long long>();
}

std::string string_field(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

void read_metrics(const fs::path& file, RunData& run) {
  for_each_json_line(file, [&](const Json& j, const std::string& where) {
    const std::string type = string_field(j, "type");
    if (type != "iteration" && type != "validation") {
      if (!j.contains("type") || !j["type"].is_string()) fail(where + ": a record without a \"type\"");
      return;  // a newer kind of record: not ours to plot
    }
    const char* record = type == "iteration" ? "an iteration record" : "a validation record";
    MetricPoint p;
    p.iteration = integer_field(j, "iteration", where, record);
    p.epoch = j.contains("epoch") ? static_cast<int>(integer_field(j, "epoch", where, record)) : 0;
    p.loss = number_field(j, "loss", where, record);
    p.accuracy = number_field(j, "accuracy", where, record);
    p.learn_rate = optional_number(j, "learn_rate", where, record);
    p.time_s = optional_number(j, "time_s", where, record);
    (type == "iteration" ? run.iterations : run.validations).push_back(p);
  });
}

void read_telemetry(const fs::path& file, RunData& run) {
  run.has_telemetry = true;
  for_each_json_line(file, [&](const Json& j, const std::string& where) {
    TelemetryPoint t;
    t.iteration = integer_field(j, "iteration", where, "a telemetry record");
    t.time_s = optional_number(j, "time_s", where, "a telemetry record");
    if (!j.contains("ranks") || !j["ranks"].is_array()) fail(where + ": a telemetry record without a \"ranks\" list");
    for (const auto& r : j["ranks"]) {
      if (!r.is_object()) fail(where + ": \"ranks\" holds something that is not an object");
      RankPoint s;
      s.rank = static_cast<int>(integer_field(r, "rank", where, "a rank entry"));
      s.host = string_field(r, "host");
      s.device = string_field(r, "device");
      s.samples_per_second = optional_number(r, "samples_per_second", where, "a rank entry");
      s.utilization_pct = optional_number(r, "utilization_pct", where, "a rank entry");
      t.ranks.push_back(s);
    }
    run.telemetry.push_back(std::move(t));
  });
}

std::string format_number(double v) {
  if (std::isnan(v)) return "-";
  if (v == std::floor(v) && std::abs(v) < 1e15) return std::to_string(static_cast<long long>(v));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string summary_value(const Json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return format_number(v.get<double>());
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_array()) {
    std::string s;
    for (const auto& e : v) s += (s.empty() ? "" : ", ") + summary_value(e);
    return s;
  }
  return v.dump();
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::pair<std::string, std::string>> read_config(const fs::path& file) {
  std::vector<std::pair<std::string, std::string>> config;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const std::string code = trim(line.substr(0, line.find('#')));  // '#' starts a comment, as for dlscale train
    const auto eq = code.find('=');
    if (eq != std::string::npos) config.emplace_back(trim(code.substr(0, eq)), trim(code.substr(eq + 1)));
  }
  return config;
}

// results.csv as written by results_csv(): fields quoted only when they must be.
ReportTable read_csv(const fs::path& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  ReportTable rows(1);
  std::string field;
  bool quoted = false, any = false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (quoted) {
      if (c == '"' && i + 1 < s.size() && s[i + 1] == '"') field += '"', ++i;
      else if (c == '"') quoted = false;
      else field += c;
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      rows.back().push_back(field), field.clear(), any = true;
    } else if (c == '\n') {
      rows.back().push_back(field), field.clear(), any = false;
      rows.emplace_back();
    } else if (c != '\r') {
      field += c, any = true;
    }
  }
  if (any || !field.empty()) rows.back().push_back(field);
  if (rows.back().empty()) rows.pop_back();
  return rows;
}

// "trial 3: initial-learn-rate=0.002, mini-batch-size=64" from a results.csv row:
// the swept options are the columns between "trial" and "validation_accuracy".
std::map<int, std::string> trial_names(const ReportTable& results, const fs::path& file) {
  std::map<int, std::string> names;
  if (results.empty()) return names;
  const auto& header = results[0];
  const auto end = std::find(header.begin(), header.end(), "validation_accuracy") - header.begin();
  for (std::size_t r = 1; r < results.size(); ++r) {
    const auto& row = results[r];
    if (row.empty()) continue;
    std::string name = "trial " + row[0], values;
    for (std::size_t c = 1; c < static_cast<std::size_t>(end) && c < row.size(); ++c)
      values += (values.empty() ? "" : ", ") + header[c] + "=" + row[c];
    try {
      names[std::stoi(row[0])] = values.empty() ? name : name + ": " + values;
    } catch (const std::exception&) {
      fail(file.string() + " row " + std::to_string(r + 1) + ": the trial number '" + row[0] + "' is not a number");
    }
  }
  return names;
}

// ---- the page -------------------------------------------------------------

const char* kStyle =
    "body{font-family:sans-serif;margin:24px;color:#222;background:#fff}"
    "h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px}"
    "p.where{color:#555;margin:0 0 12px;font-size:13px}"
    ".plots{display:flex;flex-wrap:wrap;gap:16px}"
    "svg.plot{border:1px solid #ddd;background:#fff}"
    "table{border-collapse:collapse;font-size:13px}"
    "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}"
    "th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}"
    ".panel{width:600px}.panel h2{margin-top:4px}"
    "details{margin-top:16px}summary{cursor:pointer;font-size:15px}";

std::string page_start(const std::string& title, const std::string& path) {
  char when[64] = "";
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S %Z", std::localtime(&now));
  return "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + html_escape(title) +
         "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" + html_escape(title) + "</h1>\n<p class=\"where\">" +
         html_escape(path) + " &middot; written " + when + " by dlscale report</p>\n";
}

const char* kPageEnd = "</body>\n</html>\n";

bool looks_numeric(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtod(s.c_str(), &end);
  return end && *end == '\0';
}

std::string html_table(const ReportTable& table, const std::string& id) {
  std::string out = "<table id=\"" + id + "\">\n";
  for (std::size_t r = 0; r < table.size(); ++r) {
    out += "<tr>";
    for (const auto& cell : table[r]) {
      if (r == 0)
        out += "<th>" + html_escape(cell) + "</th>";
      else
        out += std::string(looks_numeric(cell) ? "<td class=\"n\">" : "<td>") + html_escape(cell) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</table>\n";
}

ChartSeries metric_series(const std::string& name, const std::vector<MetricPoint>& points, double (*value)(const MetricPoint&),
                     bool markers) {
  ChartSeries s{name, {}, markers};
  for (const auto& p : points) s.points.emplace_back(static_cast<double>(p.iteration), value(p));
  return s;
}

double loss_of(const MetricPoint& p) { return p.loss; }
double accuracy_pct_of(const MetricPoint& p) { return p.accuracy * 100; }
double learn_rate_of(const MetricPoint& p) { return p.learn_rate; }

// One series per rank, in rank order, named by the rank's first sample.
std::vector<ChartSeries> rank_series(const std::vector<TelemetryPoint>& telemetry, double RankPoint::*value) {
  std::map<int, ChartSeries> by_rank;
  for (const auto& t : telemetry)
    for (const auto& r : t.ranks) {
      auto [it, added] = by_rank.try_emplace(r.rank);
      if (added) {
        it->second.name = "rank " + std::to_string(r.rank);
        std::string where = r.host;
        if (!r.device.empty()) where += (where.empty() ? "" : ", ") + r.device;
        if (!where.empty()) it->second.name += " (" + where + ")";
      }
      it->second.points.emplace_back(static_cast<double>(t.iteration), r.*value);
    }
  std::vector<ChartSeries> out;
  for (auto& [rank, s] : by_rank) out.push_back(std::move(s));
  return out;
}

// Without a trailing '/' or "/.", so that its filename is the folder's name.
std::string absolute_path(const std::string& path) {
  fs::path p = fs::absolute(path).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  return p.string();
}

const char* kNoIterations = "no data: metrics.jsonl has no iteration records yet";

}  // namespace



bool is_run_directory(const std::string& path) { return fs::is_regular_file(fs::path(path) / "metrics.jsonl"); }

bool is_sweep_folder(const std::string& path) { return fs::is_directory(fs::path(path) / "trials"); }

RunData read_run(const std::string& path) {
  RunData run;
  run.path = absolute_path(path);
  run.name = fs::path(run.path).filename().string();
  const fs::path dir(path);
  read_metrics(dir / "metrics.jsonl", run);
  if (fs::exists(dir / "telemetry.jsonl")) read_telemetry(dir / "telemetry.jsonl", run);
  if (fs::exists(dir / "summary.json")) {
    Json s;
    try {
      std::ifstream in(dir / "summary.json");
      s = Json::parse(in);
    } catch (const std::exception& e) {
      fail((dir / "summary.json").string() + ": not valid JSON (" + e.what() + ")");
    }
    if (!s.is_object()) fail((dir / "summary.json").string() + ": expected a JSON object");
    run.summary.push_back({"figure", "value"});
    for (const auto& [key, value] : s.items()) run.summary.push_back({key, summary_value(value)});
  }
  if (fs::exists(dir / "config.ini")) run.config = read_config(dir / "config.ini");
  return run;
}

SweepData read_sweep(const std::string& path) {
  SweepData sweep;
  sweep.path = absolute_path(path);
  sweep.name = fs::path(sweep.path).filename().string();
  const fs::path results = fs::path(path) / "results.csv";
  if (fs::exists(results)) sweep.results = read_csv(results);
  const auto names = trial_names(sweep.results, results);
  std::vector<int> numbers;
  for (const auto& entry : fs::directory_iterator(fs::path(path) / "trials")) {
    const std::string n = entry.path().filename().string();
    if (entry.is_directory() && !n.empty() && n.size() < 9 && std::all_of(n.begin(), n.end(), ::isdigit))
      numbers.push_back(std::stoi(n));
  }
  std::sort(numbers.begin(), numbers.end());
  for (int i : numbers) {
    const std::string run = (fs::path(path) / "trials" / std::to_string(i) / "run").string();
    if (!is_run_directory(run)) continue;  // not started, or failed before training
    sweep.trials.push_back(read_run(run));
    auto it = names.find(i);
    sweep.trials.back().name = it != names.end() ? it->second : "trial " + std::to_string(i);
  }
  return sweep;
}

std::string run_report_html(const RunData& run) {
  std::string page = page_start("dlscale report: " + run.name, run.path);
  // One flowing grid: charts first, then the summary in the last cell, so a
  // window two (or three) charts wide leaves no hole.
  page += "<div class=\"plots\">\n";
  Chart loss{"loss", "Loss", "iteration", "cross-entropy loss",
             {metric_series("training (mini-batch)", run.iterations, loss_of, false),
              metric_series("validation", run.validations, loss_of, true)},
             kNoIterations};
  Chart accuracy{"accuracy", "Accuracy", "iteration", "accuracy (%)",
                 {metric_series("training (mini-batch)", run.iterations, accuracy_pct_of, false),
                  metric_series("validation", run.validations, accuracy_pct_of, true)},
                 kNoIterations, 0, 100};
  Chart rate{"learn-rate", "Learning rate", "iteration", "learning rate",
             {metric_series("learning rate", run.iterations, learn_rate_of, false)},
             run.iterations.empty() ? kNoIterations : "no data: metrics.jsonl has no learn_rate values"};
  page += svg_line_chart(loss) + svg_line_chart(accuracy) + svg_line_chart(rate);
  const std::string no_telemetry = run.has_telemetry ? "" : "no data: this run has no telemetry.jsonl";
  Chart speed{"samples-per-second", "Samples/s per rank", "iteration", "samples/s",
              rank_series(run.telemetry, &RankPoint::samples_per_second),
              run.has_telemetry ? "no data: telemetry.jsonl has no samples_per_second values" : no_telemetry};
  Chart use{"utilization", "Device utilization per rank", "iteration", "utilization (%)",
            rank_series(run.telemetry, &RankPoint::utilization_pct),
            run.has_telemetry ? "no data: telemetry.jsonl has no utilization_pct values" : no_telemetry, 0, 100};
  page += svg_line_chart(speed) + svg_line_chart(use);
  page += "<div class=\"panel\">\n<h2>Summary</h2>\n";
  page += run.summary.empty() ? "<p>no summary.json: the run has not finished (or failed)</p>\n"
                              : html_table(run.summary, "summary");
  page += "</div>\n</div>\n";
  if (!run.config.empty()) {
    ReportTable config = {{"option", "value"}};
    for (const auto& [k, v] : run.config) config.push_back({k, v});
    page += "<details>\n<summary>config.ini (" + std::to_string(run.config.size()) + " options)</summary>\n" +
            html_table(config, "config") + "</details>\n";
  }
  return page + kPageEnd;
}

std::string sweep_report_html(const SweepData& sweep) {
  std::string page = page_start("dlscale sweep report: " + sweep.name, sweep.path);
  Chart loss{"sweep-loss", "Training loss by trial", "iteration", "mini-batch loss", {},
             "no data: no trial has written metrics.jsonl yet"};
  Chart accuracy{"sweep-validation-accuracy", "Validation accuracy by trial", "iteration", "validation accuracy (%)", {},
                 "no data: no trial has validation records", 0, 100};
  for (const auto& t : sweep.trials) {
    loss.series.push_back(metric_series(t.name, t.iterations, loss_of, false));
    accuracy.series.push_back(metric_series(t.name, t.validations, accuracy_pct_of, true));
  }
  page += "<h2>Trials</h2>\n<div class=\"plots\">\n" + svg_line_chart(loss) + svg_line_chart(accuracy) + "</div>\n";
  page += "<h2>Results</h2>\n";
  page += sweep.results.empty() ? "<p>no results.csv: the sweep has not ended</p>\n" : html_table(sweep.results, "results");
  return page + kPageEnd;
}

std::string write_report(const std::string& path, const std::string& output) {
  std::string dir = path, html;
  if (!fs::exists(path)) fail("report: " + path + " does not exist");
  if (!is_run_directory(dir) && is_run_directory((fs::path(path) / "run").string()))
    dir = (fs::path(path) / "run").string();  // a job folder of one training
  if (is_run_directory(dir)) {
    html = run_report_html(read_run(dir));
  } else if (is_sweep_folder(dir)) {
    html = sweep_report_html(read_sweep(dir));
  } else {
    fail("report: " + path + " is neither a run directory (no metrics.jsonl) nor a sweep folder (no trials/)");
  }
  const std::string target = output.empty() ? (fs::path(dir) / "report.html").string() : output;
  const std::string tmp = target + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << html;
    if (!out.flush()) {
      std::remove(tmp.c_str());
      fail("cannot write " + tmp);
    }
  }
  commit_file(tmp, target);
  return target;
}

}  // namespace dlscale
