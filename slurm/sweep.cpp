// Sweep files and trials (see sweep.h): parsing SWEEP.ini, expanding the grid
// and random draws into trials, and writing each trial's config.
#include "slurm/sweep.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "slurm/quoting.h"
#include "runtime/core/error.h"

namespace dlscale {

namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(trim(part));
  if (!s.empty() && s.back() == sep) parts.push_back("");
  return parts;
}

// Options a sweep must not vary: the job sets them, or they are not one value.
const std::set<std::string> kFixedOptions = {"output", "config", "resume", "checkpoint-path", "layer"};

class Parser {
 public:
  Parser(const std::string& path, const std::vector<std::string>& known) : path_(path), known_(known.begin(), known.end()) {}

  [[noreturn]] void error(const std::string& what) const {
    throw UsageError(path_ + ":" + std::to_string(line_) + ": " + what);
  }

  int positive(const std::string& key, const std::string& v) const {
    try {
      std::size_t used = 0;
      int n = std::stoi(v, &used);
      if (used == v.size() && n >= 1) return n;
    } catch (const std::exception&) {
    }
    error(key + " = '" + v + "': expected an integer >= 1");
  }

  double number(const std::string& key, const std::string& v) const {
    try {
      std::size_t used = 0;
      double d = std::stod(v, &used);
      if (used == v.size() && std::isfinite(d)) return d;
    } catch (const std::exception&) {
    }
    error(key + ": '" + v + "' is not a number");
  }

  std::string option(const std::string& key, const std::string& prefix) const {
    std::string name = key.substr(prefix.size());
    if (!known_.count(name)) error("unknown key '" + key + "': '" + name + "' is not a dlscale train option");
    if (kFixedOptions.count(name)) error("key '" + key + "': a sweep cannot vary " + name);
    return name;
  }

  RandomRange range(const std::string& key, const std::string& value) const {
    RandomRange r;
    r.option = option(key, "random.");
    auto parts = split(value, ':');
    r.log = parts.size() == 3 && parts[0] == "log";
    if (parts.size() != (r.log ? 3u : 2u)) error(key + " = '" + value + "': expected lo:hi or log:lo:hi");
    const std::string lo = parts[r.log ? 1 : 0], hi = parts[r.log ? 2 : 1];
    r.lo = number(key, lo), r.hi = number(key, hi);
    if (!(r.lo <= r.hi)) error(key + " = '" + value + "': lo must not exceed hi");
    if (r.log && !(r.lo > 0)) error(key + " = '" + value + "': a log range needs lo > 0");
    r.integer = lo.find_first_of(".eE") == std::string::npos && hi.find_first_of(".eE") == std::string::npos;
    return r;
  }

  void key_value(SweepSpec& s, const std::string& key, const std::string& value) {
    if (!seen_.insert(key).second) error("key '" + key + "' given twice");
    if (value.empty()) error("key '" + key + "' has no value");
    require_printable(value, path_ + ": " + key);
    if (key == "base") {
      fs::path p = value;
      s.base = (p.is_relative() ? fs::absolute(path_).parent_path() / p : p).lexically_normal().string();
    } else if (key == "name") {
      s.name = value;
    } else if (key == "metric") {
      if (value != "validation_accuracy" && value != "test_accuracy" && value != "validation_loss" && value != "test_loss")
        error("metric = '" + value + "': expected validation_accuracy, test_accuracy, validation_loss or test_loss");
      s.metric = value;
    } else if (key == "parallel") {
      s.parallel = positive(key, value);
    } else if (key == "threads-per-trial") {
      s.threads_per_trial = positive(key, value);
    } else if (key == "samples") {
      s.samples = positive(key, value);
    } else if (key == "seed") {
      if (value.find_first_not_of("0123456789") != std::string::npos || value.size() > 18)
        error("seed = '" + value + "': expected an integer >= 0");
      s.seed = std::stoull(value);
    } else if (key.rfind("grid.", 0) == 0) {
      auto values = split(value, ',');
      for (const auto& v : values)
        if (v.empty()) error(key + " = '" + value + "': an empty value in the list");
      s.grid.emplace_back(option(key, "grid."), values);
    } else if (key.rfind("random.", 0) == 0) {
      s.random.push_back(range(key, value));
    } else {
      error("unknown key '" + key + "' (expected base, name, metric, parallel, threads-per-trial, samples, seed, "
            "grid.OPTION or random.OPTION)");
    }
  }

  SweepSpec parse() {
    std::ifstream in(path_);
    if (!in) throw UsageError("cannot open sweep file " + path_);
    SweepSpec s;
    s.file = path_;
    for (std::string text; std::getline(in, text);) {
      ++line_;
      text = trim(text.substr(0, text.find('#')));
      if (text.empty()) continue;
      auto eq = text.find('=');
      if (eq == std::string::npos) error("expected key = value, got '" + text + "'");
      key_value(s, trim(text.substr(0, eq)), trim(text.substr(eq + 1)));
    }
    line_ = 0;
    check(s);
    return s;
  }

  void check(SweepSpec& s) const {
    if (s.base.empty()) throw UsageError(path_ + ": no base config (base = path/to/config.ini)");
    if (!fs::is_regular_file(s.base)) throw UsageError(path_ + ": cannot open base config " + s.base);
    if (s.name.empty()) s.name = fs::path(path_).stem().string();
    if (s.grid.empty() && s.random.empty()) throw UsageError(path_ + ": nothing to sweep (no grid.OPTION or random.OPTION)");
    if (!s.random.empty() && s.samples == 0) s.samples = 1;
    if (s.random.empty() && s.samples > 0) throw UsageError(path_ + ": samples without any random.OPTION");
    std::set<std::string> options;
    for (const auto& o : swept_options(s))
      if (!options.insert(o).second) throw UsageError(path_ + ": option " + o + " is swept twice");
  }

 private:
  std::string path_;
  std::set<std::string> known_;
  std::set<std::string> seen_;
  int line_ = 0;
};

std::string draw(const RandomRange& r, std::mt19937_64& gen) {
  // The uniform draw by hand: std::uniform_real_distribution differs between
  // standard libraries, and a seed should name the same trials everywhere.
  const double u = static_cast<double>(gen() >> 11) * 0x1.0p-53;
  double v = r.log ? std::exp(std::log(r.lo) + u * (std::log(r.hi) - std::log(r.lo))) : r.lo + u * (r.hi - r.lo);
  if (r.integer) return std::to_string(static_cast<long long>(std::llround(v)));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

SweepSpec parse_sweep(const std::string& path, const std::vector<std::string>& known_options) {
  return Parser(path, known_options).parse();
}

bool metric_higher_is_better(const std::string& metric) { return metric.find("accuracy") != std::string::npos; }

std::vector<std::string> swept_options(const SweepSpec& spec) {
  std::vector<std::string> names;
  for (const auto& [option, values] : spec.grid) names.push_back(option);
  for (const auto& r : spec.random) names.push_back(r.option);
  return names;
}

std::vector<Overrides> expand_trials(const SweepSpec& spec) {
  std::vector<Overrides> points = {{}};
  for (const auto& [option, values] : spec.grid) {
    std::vector<Overrides> next;
    for (const auto& p : points)
      for (const auto& v : values) {
        next.push_back(p);
        next.back().emplace_back(option, v);
      }
    points = std::move(next);
  }
  if (spec.random.empty()) return points;
  std::mt19937_64 gen(spec.seed);
  std::vector<Overrides> trials;
  for (const auto& p : points)
    for (int k = 0; k < spec.samples; ++k) {
      trials.push_back(p);
      for (const auto& r : spec.random) trials.back().emplace_back(r.option, draw(r, gen));
    }
  return trials;
}

std::string trial_config(const std::string& base_config_text, const Overrides& overrides) {
  std::istringstream in(base_config_text);
  std::ostringstream out;
  for (std::string line; std::getline(in, line);) {
    std::string code = trim(line.substr(0, line.find('#')));
    auto eq = code.find('=');
    const std::string key = eq == std::string::npos ? "" : trim(code.substr(0, eq));
    bool replaced = std::any_of(overrides.begin(), overrides.end(), [&](const auto& o) { return o.first == key; });
    if (!replaced) out << line << "\n";
  }
  out << "# this trial's values (dlscale sweep)\n";
  for (const auto& [option, value] : overrides) out << option << " = " << value << "\n";
  return out.str();
}

}  // namespace dlscale
