// Where this process sits in the job, read from the launcher's environment
// variables (Open MPI, Slurm, PMIx) before MPI or CUDA start. One module, unit-
// tested on recorded environments, because rank/node confusion under Slurm is
// what users of the peer systems hit most.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace dlscale {

struct RankLayout {
  // -1 where the launcher does not say: Open MPI exports no node index, and a
  // bare PMIx launch exports only the rank.
  int rank = 0, size = 1, local_rank = 0, local_size = 1, node_id = 0;
  std::string launcher;         // "slurm", "openmpi", "pmix" or "none"
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES or ""
  // The variable each value came from ("" where it is a default), so warnings
  // can name them.
  std::string rank_from, size_from, local_rank_from, local_size_from;
  // A sentence worth printing once, or "": e.g. dlscale started directly in an
  // sbatch script whose job has several tasks (one process, not SLURM_NTASKS).
  std::string hint;
};

using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup process_environment();  // getenv

// Open MPI (OMPI_COMM_WORLD_*) is preferred when present: mpirun inside an
// allocation sets both it and SLURM_*. Else Slurm when srun started the task
// (SLURM_STEP_ID set: an sbatch batch shell has SLURM_PROCID=0 and
// SLURM_LOCALID=0 but no step id, and is one process). Else PMIx (PMIX_RANK).
// Else none (a singleton). Malformed or inconsistent values throw Error naming
// the variable and its value.
RankLayout detect_layout(const EnvLookup& env);

// Cross-check with MPI (rank/size of MPI_COMM_WORLD, local from
// MPI_Comm_split_type): "" when they agree, else one warning sentence naming
// the variables that disagree. Unknown (-1) values are not compared.
std::string check_layout(const RankLayout& from_env, int mpi_rank, int mpi_size, int mpi_local_rank,
                         int mpi_local_size);

// What check_layout only notes, this refuses: MPI_COMM_WORLD smaller than the
// launcher's world means the tasks started as separate MPI jobs (srun --mpi
// not matching the MPI library makes each task a one-rank job), so every task
// would act as rank 0 and write the same run folder. Returns "" when the sizes
// agree, the launcher's size is unknown or no launcher is seen (a singleton,
// an sbatch batch shell), or MPI's world is the larger one (a launcher dlscale
// does not read, started inside an srun step); else the error sentence, naming
// both sizes, the variable read and the option to use.
std::string split_launch_error(const RankLayout& from_env, int mpi_size);

}  // namespace dlscale
