// The script a job runs: an sbatch script for a slurm profile, a plain bash
// script run in the background for the local profile. Both write the same
// job folder layout:
//   JOB/job.sh        this script            JOB/log.txt      its stdout and stderr
//   JOB/config.ini    the config it trains   JOB/run/         the run directory
//   JOB/started       when it began          JOB/exit-status  its exit code, at the end
// A job array (a sweep) has one TASK folder per config, JOB/trials/<i>/, each
// holding config.ini, run/, log.txt, started and exit-status.
//
// Every task owns its checkpoint folder (--checkpoint-path): TASK/run/checkpoints,
// or, when the config names a checkpoint-path, a folder of its own inside it
// (PATH/<job folder>[/trials/<i>]), so no requeued or resumed task can find
// another job's or trial's checkpoints.
//
// A Slurm job is preemption-ready: #SBATCH --signal=USR1@<signal-lead> asks
// the ranks to stop at a checkpoint before the time limit, training always
// runs with --resume auto, and when rank 0 has left TASK/run/preempted (it
// stopped at a checkpoint on USR1 or TERM) the script requeues its own job,
// whose next start resumes. srun's exit code is not read for this: it is the
// highest task code or 128+signal. srun runs with --kill-on-bad-exit=1, so a
// rank that dies ends the whole step. --open-mode=append keeps log.txt across
// the starts.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/training/preemption.h"
#include "slurm/profiles.h"

namespace dlscale {

// Options for `dlscale train` carried into a job (the CLI's Args).
using TrainArgs = std::vector<std::string>;

// A dataset folder the job reads, by its train option (train-data, ...).
struct DataFolder {
  std::string option;
  std::string source;  // absolute path
};

struct ScriptSpec {
  Profile profile;       // after the command line's overrides
  std::string job_name;  // as the user gave it (any text)
  std::string job_dir;   // absolute
  std::string submit_dir;  // the job runs from here, so relative paths in the config mean what they meant
  std::string dlscale;   // the dlscale executable
  int array_size = 0;    // 0: one training; N: a job array of N tasks, one per trials/<i>/config.ini
  int array_parallel = 0;  // at most this many array tasks at once (0: no limit)
  std::vector<DataFolder> staged;  // copied to node-local storage first (slurm only)
  std::string checkpoint_root;  // absolute; empty: TASK/run/checkpoints, else ROOT/<job folder>[/trials/<i>]
  TrainArgs checkpoint_defaults;  // slurm: train options that turn on periodic checkpoints when the config has none
  TrainArgs train_args;       // extra `dlscale train` options
};

// The script text. Throws UsageError for values that cannot go into a script
// (control characters, a malformed extra sbatch option).
std::string job_script(const ScriptSpec& spec);

}  // namespace dlscale
