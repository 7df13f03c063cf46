// dlscale report on synthetic run directories and sweep folders: one SVG per
// plot, every metric point in its polyline, points placed on the axes'
// scale, escaping of what comes from files, errors naming file and line, and
// the subcommand end to end.
#include "launch/report.h"

#include <regex>

#include "cli_helpers.h"
#include "expect_error.h"

namespace dlscale::testing {
namespace {

const char* const kRunPlots[] = {"loss", "accuracy", "learn-rate", "samples-per-second", "utilization"};

int count(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// The <svg> element of plot `id`, empty when the page has none.
std::string plot(const std::string& html, const std::string& id) {
  const auto start = html.find("<svg class=\"plot\" id=\"plot-" + id + "\"");
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</svg>", start) - start);
}

struct Polyline {
  std::string series;
  std::vector<std::pair<double, double>> points;
};

std::vector<Polyline> polylines(const std::string& svg) {
  std::vector<Polyline> out;
  const std::regex line("<polyline class=\"series\" data-series=\"([^\"]*)\"[^>]* points=\"([^\"]*)\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), line), end; it != end; ++it) {
    Polyline p{(*it)[1], {}};
    std::istringstream in((*it)[2].str());
    for (std::string xy; in >> xy;) {
      const auto comma = xy.find(',');
      p.points.emplace_back(std::stod(xy.substr(0, comma)), std::stod(xy.substr(comma + 1)));
    }
    out.push_back(std::move(p));
  }
  return out;
}

const Polyline* find_series(const std::vector<Polyline>& lines, const std::string& name) {
  for (const auto& l : lines)
    if (l.series == name) return &l;
  return nullptr;
}

// A run directory as dlscale train leaves it: `iterations` logged
// iterations with a falling loss, a validation every third, and (when
// `ranks` > 0) telemetry of that many ranks at each logged iteration.
void write_run(const fs::path& dir, int iterations, int ranks, const std::string& config_extra = "") {
  fs::create_directories(dir);
  std::ofstream metrics(dir / "metrics.jsonl"), telemetry;
  if (ranks > 0) telemetry.open(dir / "telemetry.jsonl");
  for (int i = 1; i <= iterations; ++i) {
    const int it = 10 * i;
    metrics << "{\"type\":\"iteration\",\"epoch\":1,\"iteration\":" << it << ",\"loss\":" << 2.0 / i
            << ",\"accuracy\":" << 0.5 + 0.05 * i << ",\"learn_rate\":" << 0.01 / i << ",\"time_s\":" << 0.1 * i << "}\n";
    if (i % 3 == 0)
      metrics << "{\"type\":\"validation\",\"epoch\":1,\"iteration\":" << it << ",\"loss\":" << 2.2 / i
              << ",\"accuracy\":" << 0.45 + 0.05 * i << ",\"time_s\":" << 0.1 * i + 0.05 << "}\n";
    if (ranks > 0) {
      telemetry << "{\"time_s\":" << 0.1 * i << ",\"iteration\":" << it << ",\"ranks\":[";
      for (int r = 0; r < ranks; ++r)
        telemetry << (r ? "," : "") << "{\"rank\":" << r << ",\"host\":\"n" << r
                  << "\",\"device\":\"cpu\",\"step_time_s\":0.02,\"samples_per_second\":" << 6000 + 100 * r + i
                  << ",\"utilization_pct\":" << 90 + r << ",\"memory_mib\":310.5,\"device_memory_mib\":null}";
      telemetry << "]}\n";
    }
  }
  std::ofstream(dir / "summary.json") << "{\"epochs\": 1, \"iterations\": " << 10 * iterations
                                      << ", \"wall_time_s\": 1.5, \"test_accuracy\": 0.93, \"devices\": [\"cpu\", \"cpu\"],"
                                         " \"validation_loss\": null}\n";
  std::ofstream(dir / "config.ini") << "# resolved by dlscale train\nsolver = adam\nmax-epochs = 1\n" << config_extra;
}

class Report : public ::testing::Test {
 protected:
  void SetUp() override { dir = scratch_dir(::testing::UnitTest::GetInstance()->current_test_info()->name()); }
  fs::path dir;
};

TEST_F(Report, RunPageHasEveryPlotWithEveryPoint) {
  write_run(dir / "run", 7, 2);
  const std::string html = run_report_html(read_run((dir / "run").string()));
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 5);
  for (const char* id : kRunPlots) EXPECT_FALSE(plot(html, id).empty()) << id;

  for (const char* id : {"loss", "accuracy"}) {
    const auto lines = polylines(plot(html, id));
    ASSERT_EQ(lines.size(), 2u) << id;
    const Polyline* training = find_series(lines, "training (mini-batch)");
    const Polyline* validation = find_series(lines, "validation");
    ASSERT_TRUE(training && validation) << id;
    EXPECT_EQ(training->points.size(), 7u) << id;
    EXPECT_EQ(validation->points.size(), 2u) << id;  // iterations 30 and 60
  }
  // The loss falls and SVG's y grows downwards: each point lies right of and below the one before.
  const auto loss = polylines(plot(html, "loss"));
  const auto& train = find_series(loss, "training (mini-batch)")->points;
  for (std::size_t i = 1; i < train.size(); ++i) {
    EXPECT_GT(train[i].first, train[i - 1].first);
    EXPECT_GT(train[i].second, train[i - 1].second);
  }
  ASSERT_EQ(polylines(plot(html, "learn-rate")).size(), 1u);
  EXPECT_EQ(polylines(plot(html, "learn-rate"))[0].points.size(), 7u);

  for (const char* id : {"samples-per-second", "utilization"}) {
    const auto lines = polylines(plot(html, id));
    ASSERT_EQ(lines.size(), 2u) << id;  // one line per rank
    EXPECT_EQ(lines[0].series, "rank 0 (n0, cpu)");
    EXPECT_EQ(lines[1].series, "rank 1 (n1, cpu)");
    for (const auto& l : lines) EXPECT_EQ(l.points.size(), 7u) << id;
  }
  // The summary table and the config, in the order of the files.
  EXPECT_NE(html.find("<td>test_accuracy</td><td class=\"n\">0.93</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>devices</td><td>cpu, cpu</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>validation_loss</td><td>-</td>"), std::string::npos);
  EXPECT_LT(html.find("<td>epochs</td>"), html.find("<td>test_accuracy</td>"));
  EXPECT_NE(html.find("<td>solver</td><td>adam</td>"), std::string::npos);
  EXPECT_EQ(read_run((dir / "run").string() + "/.").name, "run");  // `dlscale report .` names the folder
}

TEST_F(Report, PageNeedsNoNetwork) {
  write_run(dir / "run", 4, 1);
  const std::string html = run_report_html(read_run((dir / "run").string()));
  for (const char* external : {"http:", "https:", "<link", "<script", "src=", "@import", "url("})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("<meta charset=\"utf-8\">"), std::string::npos);
}

TEST_F(Report, PointsSitOnTheAxesScale) {
  // Ranges 0..10 and 0..5 are already "nice": the first point is the plot
  // area's bottom-left corner and the last its top-right.
  Chart chart{"t", "T", "iteration", "y", {{"s", {{0, 0}, {5, 2.5}, {10, 5}}, false}}, "", 0, 0};
  const std::string svg = svg_line_chart(chart);
  std::smatch rect;
  ASSERT_TRUE(std::regex_search(svg, rect, std::regex("<rect x=\"([0-9.]+)\" y=\"([0-9.]+)\" width=\"([0-9.]+)\" height=\"([0-9.]+)\"")));
  const double x0 = std::stod(rect[1]), y0 = std::stod(rect[2]), w = std::stod(rect[3]), h = std::stod(rect[4]);
  const auto lines = polylines(svg);
  ASSERT_EQ(lines.size(), 1u);
  ASSERT_EQ(lines[0].points.size(), 3u);
  EXPECT_NEAR(lines[0].points[0].first, x0, 0.1);
  EXPECT_NEAR(lines[0].points[0].second, y0 + h, 0.1);
  EXPECT_NEAR(lines[0].points[1].first, x0 + w / 2, 0.1);
  EXPECT_NEAR(lines[0].points[1].second, y0 + h / 2, 0.1);
  EXPECT_NEAR(lines[0].points[2].first, x0 + w, 0.1);
  EXPECT_NEAR(lines[0].points[2].second, y0, 0.1);
  // Ticks at 1-2-5 steps that cover the data, and the legend names the series.
  for (const char* tick : {">0<", ">8<", ">10<", ">1<", ">3<", ">5<"}) EXPECT_NE(svg.find(tick), std::string::npos) << tick;
  EXPECT_NE(svg.find("<g class=\"legend\">"), std::string::npos);
}

TEST_F(Report, NonFinitePointsAreLeftOut) {
  Chart chart{"t", "T", "x", "y", {{"s", {{1, 1}, {2, std::nan("")}, {3, 2}}, false}}, "", 0, 0};
  const auto lines = polylines(svg_line_chart(chart));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].points.size(), 2u);
}

TEST_F(Report, WithoutTelemetryThosePlotsSayNoData) {
  write_run(dir / "run", 5, 0);
  const std::string html = run_report_html(read_run((dir / "run").string()));
  for (const char* id : {"samples-per-second", "utilization"}) {
    const std::string svg = plot(html, id);
    ASSERT_FALSE(svg.empty()) << id;
    EXPECT_TRUE(polylines(svg).empty()) << id;
    EXPECT_NE(svg.find("no data: this run has no telemetry.jsonl"), std::string::npos) << id;
  }
  EXPECT_EQ(polylines(plot(html, "loss")).size(), 2u);  // the rest is drawn as usual
}

TEST_F(Report, UnfinishedRunHasNoSummaryTable) {
  write_run(dir / "run", 2, 0);
  fs::remove(dir / "run" / "summary.json");
  const std::string html = run_report_html(read_run((dir / "run").string()));
  EXPECT_NE(html.find("no summary.json"), std::string::npos);
  EXPECT_EQ(html.find("<table id=\"summary\""), std::string::npos);
}

TEST_F(Report, StringsFromFilesAreEscaped) {
  write_run(dir / "run", 3, 0, "output = runs/<script>alert(1)</script> & \"x\"\n");
  const std::string html = run_report_html(read_run((dir / "run").string()));
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<td>runs/&lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;x&quot;</td>"), std::string::npos);
  EXPECT_EQ(html_escape("<a href='x'>&</a>"), "&lt;a href=&#39;x&#39;&gt;&amp;&lt;/a&gt;");
}

TEST_F(Report, MalformedMetricsNameFileAndLine) {
  write_run(dir / "run", 2, 0);
  std::ofstream(dir / "run" / "metrics.jsonl", std::ios::app) << "\n{\"type\":\"iteration\",\"iteration\":30,\"loss\":\n";
  expect_error([&] { read_run((dir / "run").string()); }, (dir / "run" / "metrics.jsonl").string() + " line 4: not valid JSON");

  std::ofstream(dir / "run" / "metrics.jsonl") << "{\"type\":\"iteration\",\"iteration\":10,\"loss\":1,\"accuracy\":0.5}\n"
                                               << "{\"type\":\"iteration\",\"iteration\":20,\"accuracy\":0.5}\n";
  expect_error([&] { read_run((dir / "run").string()); }, "metrics.jsonl line 2: an iteration record without a number 'loss'");
  std::ofstream(dir / "run" / "metrics.jsonl") << "[1, 2]\n";
  expect_error([&] { read_run((dir / "run").string()); }, "metrics.jsonl line 1: expected a JSON object");
  std::ofstream(dir / "run" / "metrics.jsonl") << "{\"iteration\": 1}\n";
  expect_error([&] { read_run((dir / "run").string()); }, "metrics.jsonl line 1: a record without a \"type\"");
}

TEST_F(Report, MalformedTelemetryNamesFileAndLine) {
  write_run(dir / "run", 3, 2);
  std::ofstream(dir / "run" / "telemetry.jsonl", std::ios::app) << "{\"time_s\": 1, \"iteration\": 40, \"ranks\": 3}\n";
  expect_error([&] { read_run((dir / "run").string()); }, "telemetry.jsonl line 4: a telemetry record without a \"ranks\" list");
  std::ofstream(dir / "run" / "telemetry.jsonl") << "{\"iteration\": 40, \"ranks\": [{\"host\": \"n1\"}]}\n";
  expect_error([&] { read_run((dir / "run").string()); }, "telemetry.jsonl line 1: a rank entry without a number 'rank'");
}

TEST_F(Report, NullTelemetryFiguresAreGapsNotErrors) {
  write_run(dir / "run", 2, 0);
  std::ofstream(dir / "run" / "telemetry.jsonl")
      << "{\"time_s\":1,\"iteration\":10,\"ranks\":[{\"rank\":0,\"samples_per_second\":5,\"utilization_pct\":null}]}\n";
  const std::string html = run_report_html(read_run((dir / "run").string()));
  EXPECT_EQ(polylines(plot(html, "samples-per-second")).size(), 1u);
  EXPECT_NE(plot(html, "utilization").find("no data: telemetry.jsonl has no utilization_pct values"), std::string::npos);
}

// A sweep folder as dlscale sweep leaves it (slurm/sweep.h): trials/<i>/run/
// and results.csv ranked best first; trial 2 failed before training.
void write_sweep(const fs::path& dir) {
  write_run(dir / "trials" / "0" / "run", 6, 0);
  write_run(dir / "trials" / "1" / "run", 4, 0);
  fs::create_directories(dir / "trials" / "2");
  std::ofstream(dir / "trials" / "2" / "log.txt") << "dlscale: error: out of memory\n";
  std::ofstream(dir / "results.csv")
      << "trial,initial-learn-rate,solver,validation_accuracy,validation_loss,test_accuracy,test_loss,wall_time_s,state\n"
      << "1,0.002,<script>,0.9,0.3,0.89,0.31,1.50,done\n"
      << "0,0.0005,\"adam, \"\"fast\"\"\",0.8,0.5,0.79,0.52,1.60,done\n"
      << "2,0.01,sgdm,,,,,,failed\n";
}

TEST_F(Report, SweepOverlaysOneSeriesPerTrial) {
  write_sweep(dir / "sweep");
  ASSERT_TRUE(is_sweep_folder((dir / "sweep").string()));
  const SweepData sweep = read_sweep((dir / "sweep").string());
  ASSERT_EQ(sweep.trials.size(), 2u);
  const std::string html = sweep_report_html(sweep);
  EXPECT_EQ(count(html, "<svg class=\"plot\""), 2);
  const auto loss = polylines(plot(html, "sweep-loss"));
  ASSERT_EQ(loss.size(), 2u);
  EXPECT_EQ(loss[0].series, "trial 0: initial-learn-rate=0.0005, solver=adam, &quot;fast&quot;");
  EXPECT_EQ(loss[0].points.size(), 6u);
  EXPECT_EQ(loss[1].series, "trial 1: initial-learn-rate=0.002, solver=&lt;script&gt;");
  EXPECT_EQ(loss[1].points.size(), 4u);
  const auto accuracy = polylines(plot(html, "sweep-validation-accuracy"));
  ASSERT_EQ(accuracy.size(), 2u);
  EXPECT_EQ(accuracy[0].points.size(), 2u);
  EXPECT_EQ(accuracy[1].points.size(), 1u);
  // The legend names each trial once; the results table has every trial, the failed one too.
  EXPECT_EQ(count(plot(html, "sweep-loss"), "<g class=\"legend\">"), 2);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_NE(html.find("<table id=\"results\">"), std::string::npos);
  EXPECT_EQ(count(html, "<tr>"), 4);
  EXPECT_NE(html.find("<td>failed</td>"), std::string::npos);
}

TEST_F(Report, SweepWithoutValidationsSaysSo) {
  fs::create_directories(dir / "sweep" / "trials" / "0" / "run");
  std::ofstream(dir / "sweep" / "trials" / "0" / "run" / "metrics.jsonl")
      << "{\"type\":\"iteration\",\"iteration\":1,\"loss\":1,\"accuracy\":0.5,\"learn_rate\":0.1}\n";
  const std::string html = sweep_report_html(read_sweep((dir / "sweep").string()));
  EXPECT_EQ(polylines(plot(html, "sweep-loss")).size(), 1u);
  EXPECT_EQ(polylines(plot(html, "sweep-loss"))[0].series, "trial 0");  // no results.csv yet
  EXPECT_NE(plot(html, "sweep-validation-accuracy").find("no data"), std::string::npos);
  EXPECT_NE(html.find("no results.csv"), std::string::npos);
}

TEST_F(Report, WritesThePageAtomicallyWhereAsked) {
  write_run(dir / "run", 3, 1);
  EXPECT_EQ(write_report((dir / "run").string()), (dir / "run" / "report.html").string());
  EXPECT_NE(read_file(dir / "run" / "report.html").find("id=\"plot-utilization\""), std::string::npos);
  EXPECT_FALSE(fs::exists(dir / "run" / "report.html.tmp"));
  write_report((dir / "run").string(), (dir / "elsewhere.html").string());
  EXPECT_TRUE(fs::exists(dir / "elsewhere.html"));
  // A job folder of one training: its run/ is the run directory.
  write_run(dir / "job" / "run", 2, 0);
  EXPECT_EQ(write_report((dir / "job").string()), (dir / "job" / "run" / "report.html").string());
  write_sweep(dir / "sweep");
  EXPECT_EQ(write_report((dir / "sweep").string()), (dir / "sweep" / "report.html").string());
}

TEST_F(Report, PathsThatAreNeitherRunNorSweepAreErrors) {
  fs::create_directories(dir / "empty");
  expect_error([&] { write_report((dir / "empty").string()); },
               (dir / "empty").string() + " is neither a run directory (no metrics.jsonl) nor a sweep folder (no trials/)");
  expect_error([&] { write_report((dir / "missing").string()); }, (dir / "missing").string() + " does not exist");
  EXPECT_FALSE(fs::exists(dir / "empty" / "report.html"));
}

TEST_F(Report, SubcommandEndToEnd) {
  write_run(dir / "run", 4, 2);
  RunResult r = run_command(dlscale_binary() + " report " + (dir / "run").string(), dir);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("report: " + (dir / "run" / "report.html").string()), std::string::npos) << r.out;
  EXPECT_EQ(count(read_file(dir / "run" / "report.html"), "<svg class=\"plot\""), 5);

  std::ofstream(dir / "run" / "metrics.jsonl", std::ios::app) << "not json\n";
  r = run_command(dlscale_binary() + " report " + (dir / "run").string() + " --output " + (dir / "x.html").string(), dir);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.rfind("dlscale: error: " + (dir / "run" / "metrics.jsonl").string() + " line 6: not valid JSON", 0), 0u)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.html"));
  EXPECT_FALSE(fs::exists(dir / "x.html.tmp"));

  r = run_command(dlscale_binary() + " report", dir);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("give a run directory or a sweep folder"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace dlscale::testing
