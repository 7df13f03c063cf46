// dlscale sweep SWEEP.ini: one independent training per trial (slurm/sweep.h).
// On a slurm profile the trials are one job array that Slurm queues (%K
// throttle); on the local profile this process starts `bash JOB/job.sh I` for
// at most K trials at once. Either way it waits for all of them, then writes
// JOB/results.csv and prints the ranked table. A local sweep records this
// process in job.json: `dlscale cancel` (TERM) or Ctrl-C (INT) make it stop
// its running trials, start no more, and report what ended.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "launch/commands.h"
#include "launch/parse_options.h"
#include "slurm/profiles.h"
#include "launch/train_options.h"
#include "runtime/core/gpu.h"
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

// The signal (TERM from `dlscale cancel`, INT from Ctrl-C) that asked a
// local sweep to stop; 0 while it runs on.
volatile std::sig_atomic_t stop_signal = 0;
extern "C" void ask_to_stop(int sig) { stop_signal = sig; }

void install_stop_handlers() {
  struct sigaction action {};
  action.sa_handler = ask_to_stop;
  sigemptyset(&action.sa_mask);
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

// The trial's exit code, once it has ended (-1 while it runs).
int ended_code(const Running& r) {
  int status = 0;
  const pid_t ended = waitpid(static_cast<pid_t>(r.pid), &status, WNOHANG);
  if (ended == 0 || (ended < 0 && errno == EINTR)) return -1;
  return ended < 0 ? 255 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// TERM to every running trial's process group (each runs in a session of its
// own, so this reaches its ranks), KILL to those left after 10 s; each is
// then cancelled, as are the trials never started.
void stop_trials(const JobRecord& job, std::vector<Running>& running, std::vector<JobStatus>& states, int next) {
  if (read_record(job.dir, "cancelled").empty()) write_record(job.dir, "cancelled", utc_now());  // Ctrl-C
  for (const Running& r : running) kill(-static_cast<pid_t>(r.pid), SIGTERM);
  for (int tick = 0; !running.empty(); ++tick) {
    if (tick == 100)
      for (const Running& r : running) kill(-static_cast<pid_t>(r.pid), SIGKILL);
    for (auto it = running.begin(); it != running.end();) {
      if (ended_code(*it) < 0) {
        ++it;
        continue;
      }
      states[it->trial] = {JobState::cancelled, "stopped while running"};
      std::cout << "trial " << it->trial << " cancelled\n" << std::flush;
      it = running.erase(it);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (int i = next; i < job.array_size; ++i) states[i] = {JobState::cancelled, "not started"};
}

// Starts the trials of a local job array, at most `parallel` at once, each
// trial on its own GPU when there are GPUs; waits for all of them.
std::vector<JobStatus> run_local(const JobRecord& job, int parallel, const std::vector<std::string>& gpus) {
  std::vector<JobStatus> states(job.array_size);
  std::vector<bool> slot_busy(parallel, false);
  std::vector<Running> running;
  const std::string script = (fs::path(job.dir) / "job.sh").string();
  int next = 0;
  while (next < job.array_size || !running.empty()) {
    if (stop_signal) {
      stop_trials(job, running, states, next);
      break;
    }
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
      const int code = ended_code(*it);
      if (code < 0) {
        ++it;
        continue;
      }
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
  if (!request.profile.is_slurm()) {
    // This process runs the trials: recorded so that `dlscale jobs` sees it
    // alive and `dlscale cancel` can stop it.
    install_stop_handlers();
    job.pid = getpid();
    job.pid_start = process_start_time(job.pid);
    write_job_record(job);
  }
  const auto states = request.profile.is_slurm() ? wait_slurm(job) : run_local(job, parallel, gpus);
  const int code = report(spec, job, trials, states);
  return stop_signal ? 128 + stop_signal : code;
}

}  // namespace dlscale
