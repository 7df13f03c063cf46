// Submitting and cancelling jobs: the library side of dlscale submit and
// dlscale cancel, usable by other front ends (a sweep submits one job array).
#pragma once

#include <string>
#include <vector>

#include "slurm/profiles.h"
#include "slurm/job_folder.h"
#include "slurm/job_script.h"
#include "slurm/job_status.h"

namespace dlscale {

struct JobRequest {
  Profile profile;                   // after the command line's overrides
  std::string name;                  // any text; the folder name is a safe version of it
  std::vector<std::string> configs;  // config files; more than one (or as_array) makes a job array
  bool as_array = false;             // trials/<i>/ folders even for a single config
  int array_parallel = 0;            // at most this many array tasks at once (0: no limit)
  TrainArgs train_args;                   // extra `dlscale train` options
  bool dry_run = false;              // write the folder and script, submit nothing
  std::string dlscale;               // the executable the job runs; empty: this one
};

// Creates the job folder (configs copied in, job.sh, job.json) and submits it:
// sbatch for a slurm profile, a background process for local (one training
// only: a local array is started task by task by the caller, `bash job.sh I`).
// The returned record has the Slurm job id or the pid.
JobRecord submit_job(const JobRequest& request);

// The dataset folders a config reads (train-data, validation-data,
// test-data), the extra train options winning over the file, made absolute
// against `base`.
std::vector<DataFolder> data_folders(const std::string& config, const TrainArgs& train_args, const std::string& base);
// train_args without the dataset options (replaced by the staged copies).
TrainArgs without_data_options(const TrainArgs& train_args);

// Cancels a queued or running job (scancel, or TERM to a local job's process
// group, then KILL after 10 s) and marks it cancelled. Returns false, doing
// nothing, when the job has finished already.
bool cancel_job(const JobRecord& job);

}  // namespace dlscale
