// dlscale submit CONFIG: puts a training job into a job folder and hands it
// to the profile's cluster (sbatch), or starts it in the background (local).
#include <filesystem>
#include <iostream>

#include "launch/commands.h"
#include "launch/parse_options.h"
#include "slurm/profiles.h"
#include "slurm/jobs.h"

namespace dlscale {

namespace po = boost::program_options;

namespace {

const char* kUsage =
    "usage: dlscale submit CONFIG [options] [-- dlscale train options]\n"
    "  e.g. dlscale submit cnn.ini --profile gpu --nodes 2 --time 01:00:00 -- --max-epochs 4\n";

po::options_description submit_options() {
  po::options_description desc("dlscale submit options (the profile gives the rest)");
  desc.add_options()("help,h", "this text")("profile", po::value<std::string>(), "cluster profile (dlscale profiles)")(
      "name", po::value<std::string>(), "job name (default: the config's file name)")(
      "nodes", po::value<std::string>(), "nodes (slurm): N, or MIN-MAX to let a requeue run on fewer")("tasks-per-node", po::value<int>(), "ranks per node")(
      "time", po::value<std::string>(), "time limit, e.g. 02:00:00 (slurm)")(
      "partition", po::value<std::string>(), "partition (slurm)")(
      "stage-data", po::value<std::string>(), "true|false: copy the datasets to node-local storage first (slurm)")(
      "dry-run", "write the job folder and script, submit nothing")("config", po::value<std::string>(), "config file");
  return desc;
}

bool parse_flag(const std::string& v) {
  if (v == "true" || v == "yes" || v == "1" || v == "on") return true;
  if (v == "false" || v == "no" || v == "0" || v == "off") return false;
  throw UsageError("submit: --stage-data " + v + ": expected true or false");
}

// The profile with the command line's overrides applied.
Profile chosen_profile(const po::variables_map& vm) {
  ProfileSet set = load_profiles(profiles_path());
  Profile p = set.select(vm.count("profile") ? vm["profile"].as<std::string>() : "");
  auto positive = [&](const char* name) {
    int v = vm[name].as<int>();
    if (v < 1) throw UsageError(std::string("submit: --") + name + " must be at least 1");
    return v;
  };
  if (vm.count("nodes")) set_node_count(p, vm["nodes"].as<std::string>(), "submit: --nodes");
  if (vm.count("tasks-per-node")) p.tasks_per_node = positive("tasks-per-node");
  if (vm.count("time")) p.time = vm["time"].as<std::string>();
  if (vm.count("partition")) p.partition = vm["partition"].as<std::string>();
  if (vm.count("stage-data")) p.stage_data = parse_flag(vm["stage-data"].as<std::string>());
  if (!p.is_slurm()) {
    for (const char* slurm_only : {"nodes", "time", "partition"})
      if (vm.count(slurm_only))
        throw UsageError(std::string("submit: --") + slurm_only + " needs a slurm profile (" + p.name +
                         " runs on this machine)");
    if (p.stage_data) throw UsageError("submit: --stage-data needs a slurm profile (" + p.name + " runs on this machine)");
  }
  return p;
}

}  // namespace

int submit_command(const Args& all, Communicator& comm) {
  auto dashes = std::find(all.begin(), all.end(), "--");
  Args args(all.begin(), dashes), train_args;
  if (dashes != all.end()) train_args.assign(dashes + 1, all.end());
  auto desc = submit_options();
  po::positional_options_description positional;
  positional.add("config", 1);
  po::variables_map vm;
  parse_options(args, desc, vm, &positional);
  if (vm.count("help")) {
    if (comm.rank() == 0) std::cout << kUsage << "\n" << desc;
    return 0;
  }
  if (comm.size() > 1) throw UsageError("submit: run it as one process, not under mpirun or srun");
  if (!vm.count("config")) throw UsageError(std::string("submit: give the config file\n") + kUsage);
  JobRequest request;
  request.profile = chosen_profile(vm);
  request.configs = {vm["config"].as<std::string>()};
  request.name = vm.count("name") ? vm["name"].as<std::string>()
                                  : std::filesystem::path(request.configs[0]).stem().string();
  if (request.name.empty()) throw UsageError("submit: --name must not be empty");
  request.train_args = train_args;
  request.dry_run = vm.count("dry-run") > 0;
  JobRecord job = submit_job(request);
  if (request.dry_run)
    std::cout << "wrote " << job.folder << " (not submitted: --dry-run)\n";
  else if (job.type == "slurm")
    std::cout << "submitted " << job.folder << " (Slurm job " << job.slurm_id << ", profile " << job.profile << ")\n";
  else
    std::cout << "submitted " << job.folder << " (local process " << job.pid << ", profile " << job.profile << ")\n";
  std::cout << "job folder: " << job.dir << "\n"
            << "follow it with: dlscale jobs; results: dlscale fetch " << job.folder << "\n";
  return 0;
}

}  // namespace dlscale
