// dlscale monitor: each rank's device, utilization, memory and step time,
// live, from RUN/telemetry.jsonl of a running job (runtime/monitoring/telemetry.h). It
// only reads files, so it needs no MPI: it runs beside a local job or on a
// login node while a Slurm job writes its job folder.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "launch/commands.h"
#include "launch/parse_options.h"
#include "runtime/monitoring/telemetry.h"
#include "runtime/monitoring/text_table.h"
#include "slurm/job_folder.h"

namespace dlscale {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

struct Target {
  fs::path run;                // the run directory (may not exist yet for a queued job)
  std::optional<fs::path> task;  // the job or trial folder around it, whose exit-status ends a failed job
};

bool is_run_directory(const fs::path& d) {
  return fs::exists(d / "metrics.jsonl") || fs::exists(d / "telemetry.jsonl") || fs::exists(d / "summary.json");
}

// A run directory, a job folder (JOB/job.json, run in JOB/run) or a trial
// folder of a sweep (JOB/trials/<i>/run).
Target resolve(const std::string& path) {
  const fs::path p(path);
  std::error_code ec;
  if (!fs::is_directory(p, ec))
    throw UsageError("monitor: " + path + (fs::exists(p, ec) ? " is not a folder" : " does not exist") +
                     "; give a run directory (the train --output) or a job folder");
  if (fs::exists(p / "job.json")) {
    JobRecord job = read_job_record(p.string());
    if (job.array_size > 0)
      throw UsageError("monitor: " + path + " is a sweep of " + std::to_string(job.array_size) +
                       " trials; monitor one trial, e.g. " + (p / "trials" / "0").string());
    return {fs::path(task_dir(job, 0)) / "run", fs::path(job.dir)};
  }
  if (is_run_directory(p)) return {p, std::nullopt};
  if (is_run_directory(p / "run")) return {p / "run", p};
  throw UsageError("monitor: " + path +
                   " is neither a run directory (metrics.jsonl, telemetry.jsonl) nor a job folder (job.json)");
}

// The last complete line of a file that is being appended to ("" if none):
// a line without its newline yet is still being written.
std::string last_line(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return "";
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  for (std::streamoff window = 1 << 16;; window *= 4) {
    const std::streamoff from = std::max<std::streamoff>(0, size - window);
    std::string text(static_cast<std::size_t>(size - from), '\0');
    in.seekg(from);
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    const auto end = text.rfind('\n');
    if (end != std::string::npos) {
      text.resize(end);
      const auto start = text.rfind('\n');
      if (start != std::string::npos) return text.substr(start + 1);
      if (from == 0) return text;
    } else if (from == 0) {
      return "";
    }
  }
}

double age_seconds(const fs::path& file) {
  std::error_code ec;
  const auto t = fs::last_write_time(file, ec);
  if (ec) return 0;
  return std::max(0.0, std::chrono::duration<double>(fs::file_time_type::clock::now() - t).count());
}

std::string fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// One line per straggling rank, or per node whose ranks all straggle.
std::string straggler_lines(const std::vector<Straggler>& stragglers) {
  std::string text;
  std::vector<std::string> nodes_said;
  for (const auto& s : stragglers) {
    if (!s.whole_node) {
      text += straggler_message({s}) + "\n";
    } else if (std::find(nodes_said.begin(), nodes_said.end(), s.host) == nodes_said.end()) {
      std::vector<Straggler> node;
      for (const auto& t : stragglers)
        if (t.host == s.host) node.push_back(t);
      text += straggler_message(node) + "\n";
      nodes_said.push_back(s.host);
    }
  }
  return text;
}

std::string link_straggler_lines(const TelemetryRecord& r) {
  std::string text, rank0_host;
  for (const auto& s : r.ranks)
    if (s.rank == 0) rank0_host = s.host;
  for (const auto& l : r.link_stragglers) text += link_straggler_message(l, rank0_host, Telemetry::kLinkProbeBytes) + "\n";
  return text;
}

std::string table(const fs::path& run, const TelemetryRecord& r, double age) {
  std::vector<std::vector<std::string>> rows = {
      {"RANK", "HOST", "DEVICE", "UTIL(%)", "MEMORY(MiB)", "DEVICE-MEMORY(MiB)", "STEP(ms)", "COMPUTE(ms)",
       "SAMPLES/S", "STRAGGLER", "AGE(s)"}};
  auto straggling = [&](int rank) -> std::string {
    if (std::any_of(r.stragglers.begin(), r.stragglers.end(), [&](const auto& s) { return s.rank == rank; }))
      return "yes";
    for (const auto& l : r.link_stragglers)
      if (std::find(l.ranks.begin(), l.ranks.end(), rank) != l.ranks.end()) return "link";
    return "-";
  };
  for (const auto& s : r.ranks)
    rows.push_back({std::to_string(s.rank), s.host.empty() ? "-" : s.host, s.device.empty() ? "-" : s.device,
                    fixed(s.utilization_pct, 1), fixed(s.memory_mib, 1),
                    s.device_memory_mib ? fixed(*s.device_memory_mib, 1) : "-", fixed(s.step_time_s * 1000, 3),
                    fixed(s.compute_time_s * 1000, 3), fixed(s.samples_per_second, 1),
                    straggling(s.rank), fixed(age, 1)});
  return run.string() + ": iteration " + std::to_string(r.iteration) + ", " + fixed(r.time_s, 1) +
         " s into the run, " + std::to_string(r.ranks.size()) + " rank(s)\n" + align_columns(rows) +
         straggler_lines(r.stragglers) + link_straggler_lines(r);
}

std::string finished_note(const fs::path& run) {
  std::string note = "run finished: " + (run / "summary.json").string() + " written";
  try {
    std::ifstream in(run / "summary.json");
    auto s = nlohmann::json::parse(in);
    auto add = [&](const char* key, const char* label, int decimals) {
      if (s.contains(key) && s[key].is_number())
        note += std::string(", ") + label + " " + fixed(s[key].get<double>(), decimals);
    };
    add("wall_time_s", "wall time (s)", 1);
    add("samples_per_second", "samples/s", 1);
    add("peak_rss_mib", "peak memory (MiB)", 1);
  } catch (const std::exception&) {
    // being renamed into place: the note without figures is still true
  }
  return note;
}

}  // namespace

int monitor_command(const Args& args) {
  po::options_description desc("usage: dlscale monitor RUN|JOB_FOLDER [--interval S] [--once] [--wait S]");
  desc.add_options()("help,h", "this text")("path", po::value<std::string>(), "run directory or job folder")(
      "interval", po::value<double>()->default_value(2), "seconds between refreshes")(
      "once", "print one table and exit")(
      "wait", po::value<double>()->default_value(300), "seconds to wait for the first sample before giving up");
  po::positional_options_description positional;
  positional.add("path", 1);
  po::variables_map vm;
  parse_options(args, desc, vm, &positional);
  if (vm.count("help")) {
    std::cout << desc;
    return 0;
  }
  if (!vm.count("path")) {
    std::ostringstream usage;
    usage << desc;
    throw UsageError("monitor: give a run directory or a job folder\n" + usage.str());
  }
  const double interval = vm["interval"].as<double>(), wait = vm["wait"].as<double>();
  if (!(interval > 0)) throw UsageError("monitor: --interval must be a positive number of seconds");
  if (!(wait >= 0)) throw UsageError("monitor: --wait must be zero or more seconds");
  const bool once = vm.count("once") > 0, terminal = isatty(STDOUT_FILENO);
  const Target target = resolve(vm["path"].as<std::string>());
  const fs::path telemetry = target.run / "telemetry.jsonl";

  const auto t0 = std::chrono::steady_clock::now();
  bool said_waiting = false;
  std::string shown;
  for (;;) {
    const bool finished = fs::exists(target.run / "summary.json");
    const std::string line = last_line(telemetry);
    if (!line.empty() && (terminal || line != shown)) {
      const std::string text = table(target.run, parse_telemetry_line(line), age_seconds(telemetry));
      std::cout << (terminal ? "\033[H\033[2J" : (shown.empty() ? "" : "\n")) << text << std::flush;
      shown = line;
    }
    if (finished) {
      std::cout << finished_note(target.run) << std::endl;
      return 0;
    }
    if (target.task) {
      const std::string status =
          fs::exists(*target.task / "exit-status") ? read_record(target.task->string(), "exit-status") : "";
      if (!status.empty())
        fail("job " + target.task->string() + " ended with exit status " + status +
             " without writing summary.json; see " + (*target.task / "log.txt").string());
    }
    if (line.empty()) {
      if (!said_waiting) std::cout << "waiting for the first sample in " << telemetry.string() << " ..." << std::endl;
      said_waiting = true;
      const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (waited >= wait)
        fail("no telemetry in " + target.run.string() + " after " + fixed(waited, 0) +
             " s: the ranks write telemetry.jsonl from their first logged iteration on; is the job running? "
             "(--wait sets how long to wait)");
    } else if (once) {
      return 0;
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
  }
}

}  // namespace dlscale
