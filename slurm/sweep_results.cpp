// A sweep's results (see sweep.h): each trial's summary.json, ranked by the
// chosen metric, as results.csv and as the printed table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "runtime/monitoring/text_table.h"
#include "slurm/sweep.h"

namespace dlscale {

namespace fs = std::filesystem;

namespace {

constexpr double kNone = std::numeric_limits<double>::quiet_NaN();

double figure(const nlohmann::json& s, const char* key) {
  return s.contains(key) && s[key].is_number() ? s[key].get<double>() : kNone;
}

double metric_of(const TrialResult& r, const std::string& metric) {
  if (metric == "validation_accuracy") return r.validation_accuracy;
  if (metric == "validation_loss") return r.validation_loss;
  if (metric == "test_accuracy") return r.test_accuracy;
  return r.test_loss;
}

// validation_accuracy -> validation_loss, test_accuracy -> test_loss.
std::string loss_of(const std::string& accuracy_metric) {
  return accuracy_metric.substr(0, accuracy_metric.find('_')) + "_loss";
}

std::string number(double v, int precision) {
  if (std::isnan(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", precision, v);
  return buf;
}

std::string value_of(const Overrides& o, const std::string& option) {
  for (const auto& [k, v] : o)
    if (k == option) return v;
  return "";
}

// A CSV field: quoted when it holds a separator, a quote or a line break.
std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n\r") == std::string::npos) return v;
  std::string q = "\"";
  for (char c : v) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::vector<std::string> row_cells(const TrialResult& r, const std::vector<std::string>& options, int precision) {
  std::vector<std::string> cells = {std::to_string(r.trial)};
  for (const auto& o : options) cells.push_back(value_of(r.overrides, o));
  for (double v : {r.validation_accuracy, r.validation_loss, r.test_accuracy, r.test_loss})
    cells.push_back(number(v, precision));
  cells.push_back(number(r.wall_time_s, 2));
  cells.push_back(state_name(r.state));
  return cells;
}

std::vector<std::string> header(const std::vector<std::string>& options) {
  std::vector<std::string> h = {"trial"};
  h.insert(h.end(), options.begin(), options.end());
  for (const char* c : {"validation_accuracy", "validation_loss", "test_accuracy", "test_loss", "wall_time_s", "state"})
    h.push_back(c);
  return h;
}

}  // namespace

std::vector<TrialResult> collect_results(const JobRecord& job, const std::vector<Overrides>& trials,
                                         const std::vector<JobStatus>& states) {
  std::vector<TrialResult> results;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    TrialResult r{static_cast<int>(i), trials[i], states[i].state, states[i].detail, kNone, kNone, kNone, kNone, kNone};
    const fs::path summary = fs::path(task_dir(job, static_cast<int>(i))) / "run" / "summary.json";
    if (r.state == JobState::done && fs::exists(summary)) {
      try {
        std::ifstream in(summary);
        auto s = nlohmann::json::parse(in);
        r.validation_accuracy = figure(s, "validation_accuracy");
        r.validation_loss = figure(s, "validation_loss");
        r.test_accuracy = figure(s, "test_accuracy");
        r.test_loss = figure(s, "test_loss");
        r.wall_time_s = figure(s, "wall_time_s");
      } catch (const std::exception& e) {
        r.detail = "unreadable summary.json: " + std::string(e.what());
      }
    }
    results.push_back(r);
  }
  return results;
}

void sort_results(std::vector<TrialResult>& results, const std::string& metric) {
  const bool higher = metric_higher_is_better(metric);
  // 0: done with the metric, 1: done without it, 2: did not finish well.
  auto rank = [&](const TrialResult& r) {
    if (r.state != JobState::done) return 2;
    return std::isnan(metric_of(r, metric)) ? 1 : 0;
  };
  std::stable_sort(results.begin(), results.end(), [&](const TrialResult& a, const TrialResult& b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (rank(a) != 0) return false;
    double x = metric_of(a, metric), y = metric_of(b, metric);
    if (x != y) return higher ? x > y : x < y;
    // Equal accuracies (common on easy data): the lower loss of the same split wins.
    if (!higher) return false;
    double u = metric_of(a, loss_of(metric)), v = metric_of(b, loss_of(metric));
    return !std::isnan(u) && (std::isnan(v) || u < v);
  });
}

std::string results_csv(const std::vector<TrialResult>& results, const std::vector<std::string>& options) {
  std::ostringstream out;
  auto line = [&](const std::vector<std::string>& cells) {
    for (std::size_t c = 0; c < cells.size(); ++c) out << (c ? "," : "") << csv_field(cells[c]);
    out << "\n";
  };
  line(header(options));
  for (const auto& r : results) line(row_cells(r, options, 6));
  return out.str();
}

std::string results_table(const std::vector<TrialResult>& results, const std::vector<std::string>& options,
                          const std::string& metric) {
  const bool best_exists = !results.empty() && results[0].state == JobState::done && !std::isnan(metric_of(results[0], metric));
  std::vector<std::vector<std::string>> rows = {header(options)};
  rows[0].insert(rows[0].begin(), "");
  for (std::size_t i = 0; i < results.size(); ++i) {
    auto cells = row_cells(results[i], options, 4);
    for (auto& c : cells)
      if (c.empty()) c = "-";
    if (!results[i].detail.empty() && results[i].state != JobState::done) cells.back() += " (" + results[i].detail + ")";
    cells.insert(cells.begin(), best_exists && i == 0 ? "*" : "");
    rows.push_back(cells);
  }
  std::ostringstream out;
  out << align_columns(rows);
  if (best_exists)
    out << "* best by " << metric << " (" << (metric_higher_is_better(metric) ? "highest" : "lowest") << "): trial "
        << results[0].trial << "\n";
  else
    out << "no trial finished with a " << metric << "\n";
  return out.str();
}

}  // namespace dlscale
