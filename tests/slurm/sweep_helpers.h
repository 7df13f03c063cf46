// Helpers for the sweep tests: a sweep file over the job tests' MLP (one
// epoch), running `dlscale sweep`, and checking results.csv against each
// trial's run/summary.json.
#pragma once

#include <cmath>
#include <sstream>

#include "golden.h"
#include "job_helpers.h"

namespace dlscale::testing {

class SweepTest : public JobsTest {
 protected:
  // A sweep file whose base is the 1-epoch MLP, plus `lines`.
  fs::path sweep_file(const std::string& lines) {
    std::string base = replace_all(read_file(dir / "mlp.ini"), "max-epochs = 3", "max-epochs = 1");
    std::ofstream(dir / "mlp1.ini") << base;
    std::ofstream(dir / "sweep.ini") << "base = mlp1.ini\nname = lr-batch\n" << lines;
    return dir / "sweep.ini";
  }

  // Runs the sweep; returns its job folder (from "sweep FOLDER: ...").
  std::string sweep(const std::string& args, RunResult& r) {
    r = dlscale("sweep " + (dir / "sweep.ini").string() + " " + args);
    std::istringstream line(r.out);
    std::string word, folder;
    line >> word >> folder;
    EXPECT_EQ(word, "sweep") << r.out << r.err;
    return folder.substr(0, folder.size() - 1);  // without the ':'
  }

  static std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
    std::vector<std::vector<std::string>> rows;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      std::vector<std::string> cells;
      std::istringstream l(line);
      for (std::string c; std::getline(l, c, ',');) cells.push_back(c);
      if (!line.empty() && line.back() == ',') cells.push_back("");
      rows.push_back(cells);
    }
    return rows;
  }

  // results.csv has `n` trials sorted by `metric` (failed last), each row
  // matching its trial's summary.json; the printed table marks the best.
  void expect_results(const std::string& folder, const RunResult& r, int n, const std::string& metric, int failed = 0) {
    const fs::path job = dir / "jobs" / folder;
    auto rows = csv_rows(read_file(job / "results.csv"));
    ASSERT_EQ(rows.size(), static_cast<std::size_t>(n + 1)) << read_file(job / "results.csv");
    const auto& head = rows[0];
    ASSERT_EQ(head.front(), "trial");
    ASSERT_EQ(head.back(), "state");
    const std::size_t col = std::find(head.begin(), head.end(), metric) - head.begin();
    ASSERT_LT(col, head.size());
    const bool higher = metric.find("accuracy") != std::string::npos;
    double previous = higher ? 2e9 : -2e9;
    for (int i = 1; i <= n; ++i) {
      const auto& row = rows[i];
      ASSERT_EQ(row.size(), head.size());
      const std::string trial = row[0];
      if (i > n - failed) {
        EXPECT_EQ(row.back(), "failed") << trial;
        continue;
      }
      ASSERT_EQ(row.back(), "done") << trial << read_file(job / "trials" / trial / "log.txt");
      auto s = nlohmann::json::parse(read_file(job / "trials" / trial / "run" / "summary.json"));
      for (const char* key : {"test_accuracy", "test_loss"}) {
        const std::size_t c = std::find(head.begin(), head.end(), key) - head.begin();
        EXPECT_NEAR(std::stod(row[c]), s[key].get<double>(), 1e-5) << trial << " " << key;
      }
      const double v = std::stod(row[col]);
      EXPECT_TRUE(higher ? v <= previous : v >= previous) << "not sorted by " << metric << " at trial " << trial;
      if (higher && v == previous) {  // equal accuracies: the lower loss first
        const std::size_t loss = std::find(head.begin(), head.end(), metric.substr(0, metric.find('_')) + "_loss") - head.begin();
        EXPECT_GE(std::stod(row[loss]), std::stod(rows[i - 1][loss])) << "tie not broken by loss at trial " << trial;
      }
      previous = v;
      if (i == 1) {  // the best, marked in the printed table
        EXPECT_NE(r.out.find("\n*  " + trial + " "), std::string::npos) << r.out;
        EXPECT_NE(r.out.find("best by " + metric), std::string::npos) << r.out;
      }
    }
    EXPECT_NE(r.out.find("results: " + (job / "results.csv").string()), std::string::npos) << r.out;
  }
};

inline const char* kGrid2x2 = "grid.initial-learn-rate = 0.01, 0.05\ngrid.mini-batch-size = 32, 64\n";

}  // namespace dlscale::testing
