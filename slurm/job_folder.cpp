// Job folders and job.json (see job_folder.h).
#include "slurm/job_folder.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "slurm/quoting.h"
#include "runtime/core/error.h"

namespace dlscale {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_atomically(const fs::path& p, const std::string& text) {
  fs::path tmp = p;
  tmp += ".tmp";
  {
    std::ofstream out(tmp);
    out << text;
    if (!out.flush()) fail("cannot write " + tmp.string());
  }
  fs::rename(tmp, p);
}

std::string local_stamp() {
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
  return stamp;
}

}  // namespace

std::string utc_now() {
  auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return stamp;
}

std::string create_job_folder(const std::string& job_root, const std::string& name) {
  std::error_code ec;
  fs::create_directories(job_root, ec);
  if (!fs::is_directory(job_root)) fail("cannot create the job root " + job_root + (ec ? ": " + ec.message() : ""));
  const std::string base = safe_file_name(name) + "-" + local_stamp();
  for (int k = 1; k < 1000; ++k) {
    fs::path dir = fs::path(job_root) / (k == 1 ? base : base + "-" + std::to_string(k));
    // create_directory is false when the folder exists: two submits in the same second get -2, -3, ...
    if (fs::create_directory(dir, ec)) return fs::absolute(dir).lexically_normal().string();
    if (ec) fail("cannot create the job folder " + dir.string() + ": " + ec.message());
  }
  fail("cannot find a free job folder name for " + base + " in " + job_root);
}

void write_job_record(const JobRecord& j) {
  nlohmann::json r = {{"folder", j.folder},       {"name", j.name},         {"profile", j.profile},
                      {"type", j.type},           {"submitted", j.submitted}, {"config", j.config},
                      {"slurm_job_id", j.slurm_id}, {"pid", j.pid},           {"pid_start", j.pid_start},
                      {"tasks", j.tasks},         {"nodes", j.nodes},       {"array_size", j.array_size},
                      {"stage_data", j.stage_data}};
  write_atomically(fs::path(j.dir) / "job.json", r.dump(2) + "\n");
}

JobRecord read_job_record(const std::string& dir) {
  const fs::path file = fs::path(dir) / "job.json";
  nlohmann::json r;
  try {
    r = nlohmann::json::parse(read_text(file));
  } catch (const std::exception& e) {
    fail("cannot read " + file.string() + ": " + e.what());
  }
  JobRecord j;
  j.dir = fs::absolute(dir).lexically_normal().string();
  j.folder = r.value("folder", fs::path(dir).filename().string());
  j.name = r.value("name", j.folder);
  j.profile = r.value("profile", "");
  j.type = r.value("type", "local");
  j.submitted = r.value("submitted", "");
  j.config = r.value("config", "");
  j.slurm_id = r.value("slurm_job_id", "");
  j.pid = r.value("pid", 0L);
  j.pid_start = r.value("pid_start", 0ULL);
  j.tasks = r.value("tasks", 1);
  j.nodes = r.value("nodes", 1);
  j.array_size = r.value("array_size", 0);
  j.stage_data = r.value("stage_data", false);
  return j;
}

std::vector<JobRecord> list_jobs(const std::vector<std::string>& roots) {
  std::vector<JobRecord> jobs;
  std::vector<std::string> seen;
  for (const auto& root : roots) {
    std::error_code ec;
    if (!fs::is_directory(root, ec)) continue;
    for (const auto& entry : fs::directory_iterator(root, ec)) {
      if (!fs::exists(entry.path() / "job.json")) continue;
      try {
        JobRecord j = read_job_record(entry.path().string());
        if (std::find(seen.begin(), seen.end(), j.dir) != seen.end()) continue;
        seen.push_back(j.dir);
        jobs.push_back(j);
      } catch (const Error&) {
        // a folder being written, or not one of ours
      }
    }
  }
  std::sort(jobs.begin(), jobs.end(), [](const JobRecord& a, const JobRecord& b) {
    return std::tie(a.submitted, a.folder) < std::tie(b.submitted, b.folder);
  });
  return jobs;
}

JobRecord find_job(const std::vector<std::string>& roots, const std::string& key) {
  if (key.find('/') != std::string::npos && fs::exists(fs::path(key) / "job.json")) return read_job_record(key);
  std::vector<JobRecord> matches;
  for (const auto& j : list_jobs(roots))
    if (j.folder == key || (!j.slurm_id.empty() && j.slurm_id == key)) matches.push_back(j);
  if (matches.size() == 1) return matches[0];
  std::string where;
  for (const auto& r : roots) where += (where.empty() ? "" : ", ") + r;
  if (matches.empty())
    throw UsageError("no job '" + key + "' (a job folder name or Slurm job id) in " + where + " (dlscale jobs lists them)");
  std::string list;
  for (const auto& j : matches) list += "\n  " + j.dir;
  throw UsageError("'" + key + "' names several jobs; give the job folder instead:" + list);
}

std::string task_dir(const JobRecord& job, int index) {
  if (job.array_size == 0) return job.dir;
  return (fs::path(job.dir) / "trials" / std::to_string(index)).string();
}

std::string read_record(const std::string& dir, const std::string& name) {
  std::string text = read_text(fs::path(dir) / name);
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  return text;
}

void write_record(const std::string& dir, const std::string& name, const std::string& value) {
  write_atomically(fs::path(dir) / name, value + "\n");
}

}  // namespace dlscale
