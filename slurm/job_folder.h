// Job folders: JOBROOT/<name>-<time>/ with job.json (what was submitted,
// where, and the Slurm job id or local pid) beside the script and the run
// directory (layout in job_script.h). dlscale jobs, fetch and cancel find a
// job by its folder name or its Slurm job id in the profiles' job roots.
#pragma once

#include <string>
#include <vector>

namespace dlscale {

struct JobRecord {
  std::string dir;     // absolute path of the job folder
  std::string folder;  // its name: what the user types as JOB
  std::string name;    // the name as given
  std::string profile, type;  // type: local | slurm
  std::string submitted;      // ISO 8601 UTC
  std::string config;         // the config file as given (a copy is in the folder)
  std::string slurm_id;       // after sbatch; empty for local jobs
  long pid = 0;               // local jobs: the job's process (its session leader)
  unsigned long long pid_start = 0;  // ... and its start time, so a reused pid is not mistaken for it
  int tasks = 1, nodes = 1;
  int array_size = 0;  // 0: one training; N: trials/0 .. trials/N-1
  bool stage_data = false;
};

// Creates JOBROOT/<safe name>-<YYYYmmdd-HHMMSS>[-k]/, never reusing a folder.
std::string create_job_folder(const std::string& job_root, const std::string& name);

// job.json, written to a temporary file and renamed so readers never see half of it.
void write_job_record(const JobRecord& job);
JobRecord read_job_record(const std::string& dir);

// The jobs under the given roots, oldest first; folders without a readable
// job.json are skipped.
std::vector<JobRecord> list_jobs(const std::vector<std::string>& roots);

// The job whose folder name or Slurm job id is `key` (or `key` is a job
// folder's path). A UsageError when none or several match.
JobRecord find_job(const std::vector<std::string>& roots, const std::string& key);

// The folder of task `index` of a job (the job folder itself for one training).
std::string task_dir(const JobRecord& job, int index);

// Small text records in a job or task folder (exit-status, started, cancelled, ...);
// empty when the file does not exist.
std::string read_record(const std::string& dir, const std::string& name);
void write_record(const std::string& dir, const std::string& name, const std::string& value);

// Now as ISO 8601 UTC, e.g. 2026-12-02T14:05:12Z.
std::string utc_now();

}  // namespace dlscale
