// A job's state and progress. Slurm is asked while it still knows the job
// (squeue keeps finished jobs for MinJobAge seconds); after that, and for
// local jobs, the job folder's own records decide: the exit-status file the
// script writes at its end, the cancelled mark of `dlscale cancel`, and the
// last Slurm state seen, which is copied into the folder.
#pragma once

#include <string>

#include "slurm/job_folder.h"
#include "slurm/node_failures.h"
#include "slurm/slurm_client.h"

namespace dlscale {

enum class JobState { queued, running, done, failed, cancelled, unknown };
const char* state_name(JobState s);
bool is_finished(JobState s);  // done, failed or cancelled

// PENDING -> queued, RUNNING -> running, COMPLETED -> done, CANCELLED ->
// cancelled, FAILED/TIMEOUT/NODE_FAIL/... -> failed.
JobState from_slurm_state(const std::string& slurm_state);

// Live progress from RUN/metrics.jsonl (the last iteration logged) and
// RUN/config.ini (max-epochs).
struct Progress {
  bool known = false;
  int epoch = 0, max_epochs = 0;
  long long iteration = 0;
  double loss = 0;
};
Progress read_progress(const std::string& run_dir);

struct JobStatus {
  JobState state = JobState::unknown;
  std::string detail;  // why, when it is not plain (e.g. "exit status 1", "Slurm: TIMEOUT")
  Progress progress;
  int tasks_done = 0;  // job arrays: tasks finished so far
  std::vector<NodeFailure> node_failures;  // nodes lost by earlier starts (the job was requeued)
  std::vector<std::string> lost_ranks;     // dlscale's lines naming the ranks a start lost, one per start
};

// The state of task `index` (0 for a single training), from `slurm` and the folder.
JobStatus task_status(const JobRecord& job, int index, const SlurmView& slurm);
// A whole job; an array is running while any task runs, done when all are done.
JobStatus job_status(const JobRecord& job, const SlurmView& slurm);

// Whether the local job's process (its session leader) still runs.
bool local_job_alive(const JobRecord& job);

}  // namespace dlscale
