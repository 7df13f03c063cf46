// The Slurm commands dlscale uses: sbatch to submit, squeue for states,
// scancel to cancel. Each runs with the environment dlscale started with, so
// SLURM_CONF and the user's environment reach the job as sbatch exports them.
// sacct is not used: without accounting storage (slurmdbd) it knows nothing.
#pragma once

#include <map>
#include <string>

namespace dlscale {

// Submits `script` with `sbatch --parsable` from the current folder; returns
// the job id. Slurm's refusal (bad partition, limits) is an Error with its words.
std::string sbatch_submit(const std::string& script);

// What the controller knows: jobs still in its memory (pending, running, and
// finished ones for MinJobAge seconds), by id ("12", or "12_3" for array task 3).
struct SlurmView {
  bool reachable = false;
  std::string error;  // why not, when not reachable
  std::map<std::string, std::string> states;  // id -> Slurm state (PENDING, RUNNING, COMPLETED, ...)
};
SlurmView query_slurm();

// Cancels job `id` (every task of an array); an Error with scancel's words on failure.
void scancel(const std::string& id);

}  // namespace dlscale
