// dlscale submit's library side: the job folder, its script, and handing it
// to sbatch or starting it in the background (see jobs.h).
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "slurm/jobs.h"
#include "slurm/process.h"
#include "slurm/quoting.h"
#include "slurm/slurm_client.h"

namespace dlscale {

namespace fs = std::filesystem;

namespace {

const char* kDataOptions[] = {"train-data", "validation-data", "test-data"};

std::string trim(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The value of --NAME X or --NAME=X in args, or empty.
std::string option_value(const TrainArgs& args, const std::string& name) {
  std::string value;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--" + name && i + 1 < args.size()) value = args[i + 1];
    if (args[i].rfind("--" + name + "=", 0) == 0) value = args[i].substr(name.size() + 3);
  }
  return value;
}

void check_train_args(const TrainArgs& args, bool slurm) {
  for (const auto& a : args) {
    for (const char* reserved : {"--output", "--config"})
      if (a == reserved || a.rfind(std::string(reserved) + "=", 0) == 0)
        throw UsageError(std::string("submit: ") + reserved +
                         " is set by the job (the run directory is JOB/run); leave it out of the train options");
    if (slurm && (a == "--resume" || a.rfind("--resume=", 0) == 0))
      throw UsageError("submit: --resume is set by the job (--resume auto, so a requeued job continues from its "
                       "checkpoint); leave it out of the train options");
  }
}

// The keys a config file sets (comments stripped as the train config reader does).
std::map<std::string, std::string> config_entries(const std::string& config) {
  std::map<std::string, std::string> entries;
  std::ifstream in(config);
  for (std::string line; std::getline(in, line);) {
    line = trim(line.substr(0, line.find('#')));
    auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (!value.empty()) entries[key] = value;
  }
  return entries;
}

// Periodic checkpoints for a Slurm job whose configs and options choose none,
// so a job killed without warning (node failure, a preemption grace time
// shorter than a step) loses at most this much; a signal always checkpoints.
const char* kDefaultCheckpointMinutes = "30";
const char* kDefaultCheckpointKeep = "2";

TrainArgs checkpoint_defaults(const JobRequest& r) {
  auto set_anywhere = [&](const std::string& key) {
    if (!option_value(r.train_args, key).empty()) return true;
    for (const auto& c : r.configs)
      if (config_entries(c).count(key)) return true;
    return false;
  };
  if (set_anywhere("checkpoint-frequency") || set_anywhere("checkpoint-minutes")) return {};
  TrainArgs args = {"--checkpoint-minutes", kDefaultCheckpointMinutes};
  if (!set_anywhere("checkpoint-keep")) args.insert(args.end(), {"--checkpoint-keep", kDefaultCheckpointKeep});
  return args;
}

// The folder a config or the extra options name as checkpoint-path, made
// absolute against `base` (where the job runs), or empty. Every config of a
// job array must agree: one script serves all its tasks.
std::string checkpoint_root(const JobRequest& r, const std::string& base) {
  auto absolute = [&](const std::string& v) {
    fs::path p = v;
    return (p.is_relative() ? fs::path(base) / p : p).lexically_normal().string();
  };
  if (auto v = option_value(r.train_args, "checkpoint-path"); !v.empty()) return absolute(v);
  std::string first;
  for (std::size_t i = 0; i < r.configs.size(); ++i) {
    auto entries = config_entries(r.configs[i]);
    auto it = entries.find("checkpoint-path");
    const std::string root = it == entries.end() ? "" : absolute(it->second);
    if (i == 0) first = root;
    if (root != first)
      throw UsageError("checkpoint-path: every config of a job array must name the same checkpoint folder (" +
                       r.configs[i] + " has '" + root + "', " + r.configs[0] + " has '" + first + "')");
  }
  return first;
}

// train_args without --checkpoint-path (the script passes this task's own folder).
TrainArgs without_checkpoint_path(const TrainArgs& args) {
  TrainArgs out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--checkpoint-path") {
      ++i;  // and its value
      continue;
    }
    if (args[i].rfind("--checkpoint-path=", 0) != 0) out.push_back(args[i]);
  }
  return out;
}

// One rank drives one GPU (runtime/parallel/execution.cpp): a second GPU per task
// would sit idle, so a profile asking for it is a mistake, said before sbatch.
void check_one_gpu_per_task(const Profile& p) {
  if (p.gpus_per_task > 1)
    throw UsageError("profile " + p.name + (p.source.empty() ? "" : " (" + p.source + ")") + ": gpus-per-task = " +
                     std::to_string(p.gpus_per_task) +
                     ": each dlscale rank drives one GPU; set gpus-per-task = 1 and more tasks-per-node "
                     "(one rank per GPU) instead");
}

void write_file(const fs::path& p, const std::string& text, bool executable = false) {
  std::ofstream out(p);
  out << text;
  if (!out.flush()) fail("cannot write " + p.string());
  out.close();
  if (executable) chmod(p.c_str(), 0755);
}

void copy_config(const std::string& config, const fs::path& to) {
  fs::create_directories(to.parent_path());
  std::error_code ec;
  fs::copy_file(config, to, fs::copy_options::overwrite_existing, ec);
  if (ec) fail("cannot copy the config " + config + " to " + to.string() + ": " + ec.message());
}

std::vector<DataFolder> staged_folders(const JobRequest& r, const std::string& cwd) {
  if (!r.profile.stage_data) return {};
  auto first = data_folders(r.configs[0], r.train_args, cwd);
  for (std::size_t i = 1; i < r.configs.size(); ++i) {
    auto other = data_folders(r.configs[i], r.train_args, cwd);
    bool same = other.size() == first.size();
    for (std::size_t k = 0; same && k < first.size(); ++k)
      same = other[k].option == first[k].option && other[k].source == first[k].source;
    if (!same)
      throw UsageError("stage-data: every config of a job array must read the same datasets (" + r.configs[i] +
                       " differs from " + r.configs[0] + ")");
  }
  for (const auto& d : first)
    if (!fs::is_directory(d.source)) throw UsageError("stage-data: " + d.option + " folder " + d.source + " does not exist");
  return first;
}

}  // namespace

std::vector<DataFolder> data_folders(const std::string& config, const TrainArgs& train_args, const std::string& base) {
  std::map<std::string, std::string> found, entries = config_entries(config);
  for (const char* option : kDataOptions)
    if (auto it = entries.find(option); it != entries.end()) found[option] = it->second;
  for (const char* option : kDataOptions)
    if (auto v = option_value(train_args, option); !v.empty()) found[option] = v;
  std::vector<DataFolder> folders;
  for (const char* option : kDataOptions) {
    auto it = found.find(option);
    if (it == found.end()) continue;
    fs::path p = it->second;
    if (p.is_relative()) p = fs::path(base) / p;
    folders.push_back({option, p.lexically_normal().string()});
  }
  return folders;
}

TrainArgs without_data_options(const TrainArgs& args) {
  TrainArgs out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    bool data = false;
    for (const char* option : kDataOptions) {
      if (args[i] == std::string("--") + option) {
        data = true;
        ++i;  // and its value
      } else if (args[i].rfind(std::string("--") + option + "=", 0) == 0) {
        data = true;
      }
    }
    if (!data) out.push_back(args[i]);
  }
  return out;
}

JobRecord submit_job(const JobRequest& r) {
  if (r.configs.empty()) throw UsageError("submit: no config file");
  for (const auto& c : r.configs)
    if (!fs::is_regular_file(c)) throw UsageError("submit: cannot open config file " + c);
  check_train_args(r.train_args, r.profile.is_slurm());
  check_one_gpu_per_task(r.profile);
  const bool array = r.as_array || r.configs.size() > 1;
  if (array && !r.profile.is_slurm() && !r.dry_run)
    throw UsageError("submit: a local job array is started task by task (bash JOB/job.sh INDEX), not by submit_job");
  const std::string cwd = fs::current_path().string();
  ScriptSpec spec;
  spec.profile = r.profile;
  spec.job_name = r.name;
  spec.submit_dir = cwd;
  spec.dlscale = r.dlscale.empty() ? self_executable() : r.dlscale;
  spec.array_size = array ? static_cast<int>(r.configs.size()) : 0;
  spec.array_parallel = r.array_parallel;
  if (r.profile.is_slurm()) spec.checkpoint_defaults = checkpoint_defaults(r);
  spec.checkpoint_root = checkpoint_root(r, cwd);
  // Relative dataset paths: from the profile's data root, else the submit folder.
  const std::string data_base =
      r.profile.data_root.empty() ? cwd : fs::absolute(expand_home(r.profile.data_root)).string();
  spec.staged = staged_folders(r, data_base);
  const TrainArgs train_args = without_checkpoint_path(r.train_args);
  spec.train_args = spec.staged.empty() ? train_args : without_data_options(train_args);
  if (spec.staged.empty() && !r.profile.data_root.empty()) {
    spec.train_args = without_data_options(train_args);
    for (const auto& d : data_folders(r.configs[0], r.train_args, data_base))
      spec.train_args.insert(spec.train_args.end(), {"--" + d.option, d.source});
  }
  spec.job_dir = "/";  // checked before any folder exists, then for real below
  job_script(spec);

  fs::path root = fs::absolute(expand_home(r.profile.job_root));
  JobRecord job;
  job.dir = create_job_folder(root.string(), r.name);
  job.folder = fs::path(job.dir).filename().string();
  job.name = r.name;
  job.profile = r.profile.name;
  job.type = r.profile.type;
  job.submitted = utc_now();
  job.config = fs::absolute(r.configs[0]).lexically_normal().string();
  job.tasks = r.profile.nodes * r.profile.tasks_per_node;
  job.nodes = r.profile.nodes;
  job.array_size = spec.array_size;
  job.stage_data = !spec.staged.empty();
  spec.job_dir = job.dir;
  for (int i = 0; i < static_cast<int>(r.configs.size()); ++i)
    copy_config(r.configs[i], fs::path(task_dir(job, array ? i : 0)) / "config.ini");
  const fs::path script = fs::path(job.dir) / "job.sh";
  write_file(script, job_script(spec), true);
  write_job_record(job);
  if (r.dry_run) return job;
  if (r.profile.is_slurm()) {
    try {
      job.slurm_id = sbatch_submit(script.string());
    } catch (const Error&) {
      fs::remove_all(job.dir);  // nothing was submitted: leave no job behind
      throw;
    }
  } else {
    job.pid = start_detached({"bash", script.string()}, (fs::path(job.dir) / "log.txt").string());
    job.pid_start = process_start_time(job.pid);
  }
  write_job_record(job);
  return job;
}

}  // namespace dlscale
