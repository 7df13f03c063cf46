// Job states from Slurm and the job folder (see job_status.h).
#include "slurm/job_status.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "slurm/process.h"

namespace dlscale {

namespace fs = std::filesystem;

const char* state_name(JobState s) {
  switch (s) {
    case JobState::queued: return "queued";
    case JobState::running: return "running";
    case JobState::done: return "done";
    case JobState::failed: return "failed";
    case JobState::cancelled: return "cancelled";
    case JobState::unknown: break;
  }
  return "unknown";
}

bool is_finished(JobState s) { return s == JobState::done || s == JobState::failed || s == JobState::cancelled; }

JobState from_slurm_state(const std::string& s) {
  if (s == "PENDING" || s == "REQUEUED" || s == "REQUEUE_HOLD" || s == "REQUEUE_FED" || s == "RESV_DEL_HOLD")
    return JobState::queued;
  if (s == "RUNNING" || s == "CONFIGURING" || s == "COMPLETING" || s == "SIGNALING" || s == "STAGE_OUT" ||
      s == "RESIZING" || s == "SUSPENDED" || s == "STOPPED")
    return JobState::running;
  if (s == "COMPLETED") return JobState::done;
  if (s == "CANCELLED") return JobState::cancelled;
  if (s.empty()) return JobState::unknown;
  return JobState::failed;  // FAILED, TIMEOUT, NODE_FAIL, PREEMPTED, BOOT_FAIL, DEADLINE, OUT_OF_MEMORY, ...
}

namespace {

// A whole file; empty when it cannot be read (no log yet).
std::string read_text(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last complete lines of a file that may be growing.
std::vector<std::string> tail_lines(const fs::path& file, std::size_t bytes) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return {};
  in.seekg(0, std::ios::end);
  auto size = static_cast<std::size_t>(in.tellg());
  std::size_t start = size > bytes ? size - bytes : 0;
  in.seekg(static_cast<std::streamoff>(start));
  std::stringstream s;
  s << in.rdbuf();
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(s, line)) lines.push_back(line);
  if (start > 0 && !lines.empty()) lines.erase(lines.begin());  // cut in the middle
  return lines;
}

int max_epochs(const fs::path& config) {
  std::ifstream in(config);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("max-epochs = ", 0) == 0) return std::atoi(line.c_str() + 13);
  return 0;
}

// The state from the folder alone, when Slurm no longer knows (or never ran) the task.
JobStatus folder_state(const JobRecord& job, const std::string& dir, const SlurmView& slurm) {
  JobStatus st;
  std::string exit_status = read_record(dir, "exit-status");
  if (!exit_status.empty()) {
    st.state = exit_status == "0" ? JobState::done : JobState::failed;
    if (st.state == JobState::failed) st.detail = "exit status " + exit_status;
    return st;
  }
  if ((job.type == "slurm" && job.slurm_id.empty()) || (job.type != "slurm" && job.pid == 0)) {
    st.detail = "not submitted (--dry-run)";
    return st;
  }
  if (job.type != "slurm") {
    if (local_job_alive(job)) {
      // A local sweep's trial that its sweep process has not started yet has no log.
      const bool waiting = job.array_size > 0 && !fs::exists(fs::path(dir) / "log.txt");
      st.state = waiting ? JobState::queued : JobState::running;
    } else {
      st.state = JobState::failed;
      st.detail = "the job process ended without recording an exit status";
    }
    return st;
  }
  if (std::string seen = read_record(dir, "slurm-state"); !seen.empty()) {
    st.state = from_slurm_state(seen);
    if (st.state == JobState::failed) st.detail = "Slurm: " + seen;
    return st;
  }
  if (!slurm.reachable) {
    st.detail = "Slurm not reachable: " + slurm.error;
  } else if (!read_record(dir, "started").empty()) {
    st.state = JobState::failed;
    st.detail = "Slurm forgot the job and it recorded no exit status (node failure?)";
  } else {
    st.detail = "Slurm no longer knows the job and it never started";
  }
  return st;
}

}  // namespace

Progress read_progress(const std::string& run_dir) {
  Progress p;
  auto lines = tail_lines(fs::path(run_dir) / "metrics.jsonl", 16384);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    try {
      auto m = nlohmann::json::parse(*it);
      if (m.value("type", "") != "iteration") continue;
      p.known = true;
      p.epoch = m.value("epoch", 0);
      p.iteration = m.value("iteration", 0LL);
      p.loss = m.value("loss", 0.0);
      break;
    } catch (const std::exception&) {
      // a line being written
    }
  }
  p.max_epochs = max_epochs(fs::path(run_dir) / "config.ini");
  return p;
}

bool local_job_alive(const JobRecord& job) {
  return job.pid > 0 && job.pid_start != 0 && process_start_time(job.pid) == job.pid_start;
}

JobStatus task_status(const JobRecord& job, int index, const SlurmView& slurm) {
  const std::string dir = task_dir(job, index);
  JobStatus st;
  if (!read_record(job.dir, "cancelled").empty()) {
    st.state = JobState::cancelled;
  } else if (job.type == "slurm" && slurm.reachable && !job.slurm_id.empty()) {
    std::string id = job.array_size ? job.slurm_id + "_" + std::to_string(index) : job.slurm_id;
    auto it = slurm.states.find(id);
    if (it != slurm.states.end()) {
      st.state = from_slurm_state(it->second);
      if (st.state == JobState::failed) st.detail = "Slurm: " + it->second;
      // Kept in the folder: the controller forgets finished jobs after MinJobAge.
      if (is_finished(st.state) && read_record(dir, "slurm-state") != it->second)
        write_record(dir, "slurm-state", it->second);
    } else {
      st = folder_state(job, dir, slurm);
    }
  } else {
    st = folder_state(job, dir, slurm);
  }
  st.progress = read_progress((fs::path(dir) / "run").string());
  const std::string log = read_text(fs::path(dir) / "log.txt");
  st.node_failures = node_failures(log);
  st.lost_ranks = lost_rank_lines(log);
  if (!st.node_failures.empty()) st.detail += (st.detail.empty() ? "" : "; ") + describe(st.node_failures);
  // A rank lost without its node (stopped, or computing outside any collective): the line itself.
  else if (!st.lost_ranks.empty()) st.detail += (st.detail.empty() ? "" : "; ") + st.lost_ranks.back();
  return st;
}

JobStatus job_status(const JobRecord& job, const SlurmView& slurm) {
  if (job.array_size == 0) return task_status(job, 0, slurm);
  int counts[6] = {};
  JobStatus all;
  for (int i = 0; i < job.array_size; ++i) {
    JobStatus t = task_status(job, i, slurm);
    ++counts[static_cast<int>(t.state)];
    all.tasks_done += t.state == JobState::done;
  }
  auto n = [&](JobState s) { return counts[static_cast<int>(s)]; };
  if (n(JobState::running)) all.state = JobState::running;
  else if (n(JobState::queued)) all.state = JobState::queued;
  else if (n(JobState::done) == job.array_size) all.state = JobState::done;
  else if (n(JobState::cancelled)) all.state = JobState::cancelled;
  else if (n(JobState::failed)) all.state = JobState::failed;
  all.detail = std::to_string(all.tasks_done) + "/" + std::to_string(job.array_size) + " tasks done";
  return all;
}

}  // namespace dlscale
