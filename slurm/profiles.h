// Cluster profiles: where `dlscale submit` sends a job and with what resources.
// A profiles file (INI, one [NAME] section per profile) lives in the user's
// config folder; the built-in profile `local` runs jobs as processes on this
// machine. See docs/slurm.md for the format.
#pragma once

#include <string>
#include <vector>

namespace dlscale {

struct Profile {
  std::string name;
  std::string type = "local";  // local | slurm
  std::string source;          // the file it came from, or "built-in"
  // Where job folders go; "~" is the user's home.
  std::string job_root = "~/dlscale-jobs";
  int nodes = 1;
  // `nodes = MIN-MAX`: Slurm may start the job, or requeue it after a node
  // failed, on as few as min_nodes nodes (#SBATCH --nodes=MIN-MAX); the
  // resumed run re-splits the data over the ranks it has. 0: exactly `nodes`.
  int min_nodes = 0;
  int tasks_per_node = 1;
  // slurm only; 0 or empty leaves Slurm's default.
  std::string partition, account, qos, time;
  int cpus_per_task = 0;
  int gpus_per_node = 0;
  int gpus_per_task = 0;
  std::string gpu_bind;  // srun --gpu-bind; empty: per_task:N with gpus-per-task, none with gpus-per-node
  std::string mpi = "pmix";                // srun --mpi
  // SLURM_PMIX_FENCE for srun --mpi=pmix*: the job script sets it whatever
  // the submitting shell had (Slurm's tree fence can crash MPI_Init across
  // nodes; runtime/parallel/mpi_env.h).
  std::string pmix_fence = "ring";
  std::vector<std::string> sbatch_options;  // extra "#SBATCH" options, e.g. --constraint=a100
  std::vector<std::string> modules;         // `module load` before training
  bool stage_data = false;                  // copy datasets to node-local storage first
  std::string stage_dir;                    // node-local folder; may start with $VAR; empty: ${SLURM_TMPDIR:-/tmp}
  // Where data lives: relative dataset paths of a submitted config are taken
  // from here ("~" is the user's home) instead of the submit folder.
  std::string data_root;
  // Seconds before the time limit at which Slurm sends USR1 to the ranks
  // (#SBATCH --signal), so they stop at a checkpoint and the job requeues
  // itself; 0: no --signal line.
  int signal_lead = 120;

  bool is_slurm() const { return type == "slurm"; }
  // "4", or "3-4" with min_nodes
  std::string node_count() const;
};

// Sets p.nodes (and p.min_nodes) from "N" or "MIN-MAX"; `where` names the
// file and line or the option for the error.
void set_node_count(Profile& p, const std::string& value, const std::string& where);

struct ProfileSet {
  std::string path;  // the profiles file (it may not exist)
  bool file_exists = false;
  std::string file_default;  // `default = NAME` in the file, or empty
  std::vector<Profile> profiles;  // `local` first, then the file's in order

  const Profile* find(const std::string& name) const;
  // --profile, else DLSCALE_PROFILE, else the file's default, else local.
  std::string default_name(const std::string& requested = "") const;
  // The profile named `requested` (or the default); a UsageError lists the known ones.
  const Profile& select(const std::string& requested = "") const;
};

// $DLSCALE_PROFILES, else $XDG_CONFIG_HOME/dlscale/profiles.ini, else
// ~/.config/dlscale/profiles.ini.
std::string profiles_path();

// Reads the file at `path` (a missing file gives the built-in profile only).
// Mistakes (unknown key, bad value, duplicate) are a UsageError naming the
// file, line, section and key.
ProfileSet load_profiles(const std::string& path);
ProfileSet parse_profiles(const std::string& text, const std::string& path);

// `~` or `~/...` expanded with $HOME; other paths unchanged.
std::string expand_home(const std::string& path);

// A profile's job root as an absolute path ("~" expanded, relative paths
// taken from the working folder).
std::string job_root_path(const Profile& p);
// The job roots of all profiles, or of the one named `only`, without repeats.
std::vector<std::string> job_roots(const ProfileSet& set, const std::string& only = "");

// One line describing a profile's resources for `dlscale profiles`.
std::string describe(const Profile& p);

}  // namespace dlscale
