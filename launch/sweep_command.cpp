// dlscale sweep SWEEP.ini: one independent training per trial (slurm/sweep.h).
// On a slurm profile the trials are one job array that Slurm queues (%K
// throttle); on the local profile this process starts `bash JOB/job.sh I` for
// at most K trials at once. Either way it waits for all of them, then writes
// JOB/results.csv and prints the ranked table.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "launch/commands.h"
#include "launch/parse_options.h"
#include "launch/profiles.h"
#include "launch/train_options.h"
#include "runtime/gpu.h"
#include "slurm/jobs.h"
#include "slurm/process.h"
#include "slurm/sweep.h"

namespace dlscale {

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace {

const char* kUsage = "usage: dlscale sweep SWEEP.ini [--profile P] [--dry-run]   (SWEEP.ini: docs/slurm.md, Sweeps)\n";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The CUDA devices trials may use: CUDA_VISIBLE_DEVICES's list when set, else 0..N-1.
std::vector<std::string> local_gpus() {
  std::vector<std::string> ids;
  const int count = query_gpus().device_count;
  if (const char* visible = std::getenv("CUDA_VISIBLE_DEVICES"); visible && *visible) {
    std::istringstream in(visible);
    for (std::string id; std::getline(in, id, ',') && static_cast<int>(ids.size()) < count;) ids.push_back(id);
  } else {
    for (int i = 0; i < count; ++i) ids.push_back(std::to_string(i));
  }
  return ids;
}

// Writes each trial's config to `dir`; `extra` goes into the configs but not the table.
std::vector<std::string> write_trial_configs(const SweepSpec& spec, const std::vector<Overrides>& trials,
                                             const Overrides& extra, const fs::path& dir) {
  const std::string base = read_text(spec.base);
  std::vector<std::string> paths;
  for (std::size_t i = 0; i < trials.size(); ++i) {
    Overrides all = trials[i];
    all.insert(all.end(), extra.begin(), extra.end());
    paths.push_back((dir / ("trial-" + std::to_string(i) + ".ini")).string());
    std::ofstream out(paths.back());
    out << trial_config(base, all);
    if (!out.flush()) fail("cannot write " + paths.back());
  }
  return paths;
}

struct Running {
  long pid;
  int trial;
  std::size_t slot;
};

// Starts the trials of a local job array, at most `parallel` at once, each
// trial on its own GPU when there are GPUs; waits for all of them.
std::vector<JobStatus> run_local(const JobRecord& job, int parallel, const std::vector<std::string>& gpus) {
  std::vector<JobStatus> states(job.array_size);
  std::vector<bool> slot_busy(parallel, false);
  std::vector<Running> running;
  const std::string script = (fs::path(job.dir) / "job.sh").string();
  int next = 0;
  while (next < job.array_size || !running.empty()) {
    while (next < job.array_size && static_cast<int>(running.size()) < parallel) {
      std::size_t slot = 0;
      while (slot_busy[slot]) ++slot;
      // The child takes its environment from ours at spawn: this trial's GPU only.
      if (!gpus.empty()) setenv("CUDA_VISIBLE_DEVICES", gpus[slot % gpus.size()].c_str(), 1);
      const std::string log = (fs::path(task_dir(job, next)) / "log.txt").string();
      running.push_back({start_detached({"bash", script, std::to_string(next)}, log), next, slot});
      slot_busy[slot] = true;
      std::cout << "trial " << next << " started (" << running.size() << " running)\n" << std::flush;
      ++next;
    }
    // Each trial by its pid, not waitpid(-1): MPI may have children of its own.
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (auto it = running.begin(); it != running.end();) {
      int status = 0;
      pid_t ended = waitpid(static_cast<pid_t>(it->pid), &status, WNOHANG);
      if (ended == 0 || (ended < 0 && errno == EINTR)) {
        ++it;
        continue;
      }
      const int code = ended < 0 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      JobStatus& st = states[it->trial];
      st.state = code == 0 ? JobState::done : JobState::failed;
      if (code != 0) st.detail = "exit status " + std::to_string(code);
      std::cout << "trial " << it->trial << " " << state_name(st.state) << "\n" << std::flush;
      slot_busy[it->slot] = false;
      it = running.erase(it);
    }
  }
  return states;
}

// Polls Slurm (and the task folders) until every array task has ended.
std::vector<JobStatus> wait_slurm(const JobRecord& job) {
  std::vector<JobStatus> states(job.array_size);
  int reported = -1;
  for (;;) {
    const SlurmView slurm = query_slurm();
    int finished = 0;
    for (int i = 0; i < job.array_size; ++i) {
      states[i] = task_status(job, i, slurm);
      finished += is_finished(states[i].state);
    }
    if (finished != reported) std::cout << finished << "/" << job.array_size << " trials ended\n" << std::flush;
    reported = finished;
    if (finished == job.array_size) return states;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

// How many trials run at once: `parallel`, else no limit on Slurm (it
// queues), one per local GPU, or one per CPU slot of threads-per-trial cores.
// CPU-only local trials get `threads` in `extra`, so they share the cores.
int trial_slots(const SweepSpec& spec, const Profile& profile, const std::vector<std::string>& gpus, Overrides& extra) {
  if (profile.is_slurm()) return spec.parallel;
  if (!gpus.empty()) return spec.parallel ? spec.parallel : static_cast<int>(gpus.size());
  const auto swept = swept_options(spec);
  if (std::find(swept.begin(), swept.end(), "threads") == swept.end())
    extra.emplace_back("threads", std::to_string(spec.threads_per_trial));
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return spec.parallel ? spec.parallel : std::max(1, cores / spec.threads_per_trial);
}

int report(const SweepSpec& spec, const JobRecord& job, const std::vector<Overrides>& trials,
           const std::vector<JobStatus>& states) {
  auto results = collect_results(job, trials, states);
  sort_results(results, spec.metric);
  const auto options = swept_options(spec);
  const fs::path csv = fs::path(job.dir) / "results.csv";
  std::ofstream(csv) << results_csv(results, options);
  std::cout << "\n" << results_table(results, options, spec.metric) << "results: " << csv.string() << "\n";
  for (const auto& r : results)
    if (r.state == JobState::done) return 0;
  return 1;  // not one trial trained
}

}  // namespace

int sweep_command(const Args& args, Communicator& comm) {
  po::options_description desc("dlscale sweep options");
  desc.add_options()("help,h", "this text")("profile", po::value<std::string>(), "cluster profile (dlscale profiles)")(
      "dry-run", "write the sweep's job folder and trial configs, run nothing")("sweep", po::value<std::string>(), "sweep file");
  po::positional_options_description positional;
  positional.add("sweep", 1);
  po::variables_map vm;
  parse_options(args, desc, vm, &positional);
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << kUsage << "\n" << desc;
    return 0;
  }
  if (comm.size() > 1) throw UsageError("sweep: run it as one process, not under mpirun or srun");
  if (!vm.count("sweep")) throw UsageError(std::string("sweep: give the sweep file\n") + kUsage);
  const SweepSpec spec = parse_sweep(vm["sweep"].as<std::string>(), training_option_names());
  const auto trials = expand_trials(spec);

  JobRequest request;
  request.profile = load_profiles(profiles_path()).select(vm.count("profile") ? vm["profile"].as<std::string>() : "");
  request.name = spec.name;
  request.as_array = true;
  // A local array is started here, trial by trial: submit_job only lays it out.
  request.dry_run = vm.count("dry-run") > 0 || !request.profile.is_slurm();
  const auto gpus = request.profile.is_slurm() ? std::vector<std::string>{} : local_gpus();
  Overrides extra;
  const int parallel = trial_slots(spec, request.profile, gpus, extra);
  request.array_parallel = parallel;

  const fs::path staging = fs::temp_directory_path() / ("dlscale-sweep-" + std::to_string(getpid()));
  fs::create_directories(staging);
  JobRecord job;
  try {
    request.configs = write_trial_configs(spec, trials, extra, staging);
    job = submit_job(request);
  } catch (...) {
    fs::remove_all(staging);
    throw;
  }
  fs::remove_all(staging);
  fs::copy_file(spec.file, fs::path(job.dir) / "sweep.ini", fs::copy_options::overwrite_existing);
  job.config = fs::absolute(spec.file).lexically_normal().string();  // the staged trial configs are gone
  write_job_record(job);
  std::cout << "sweep " << job.folder << ": " << trials.size() << " trials of " << spec.base << ", profile " << job.profile;
  if (parallel > 0) std::cout << ", at most " << parallel << " at once";
  std::cout << (job.slurm_id.empty() ? "" : " (Slurm job array " + job.slurm_id + ")") << "\njob folder: " << job.dir << "\n"
            << std::flush;
  if (vm.count("dry-run")) {
    std::cout << "not run (--dry-run); trial configs: " << job.dir << "/trials/<i>/config.ini\n";
    return 0;
  }
  const auto states = request.profile.is_slurm() ? wait_slurm(job) : run_local(job, parallel, gpus);
  return report(spec, job, trials, states);
}

}  // namespace dlscale
