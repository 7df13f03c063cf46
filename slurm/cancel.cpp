// dlscale cancel's library side: scancel for Slurm jobs, signals for local
// ones (see jobs.h).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "slurm/jobs.h"
#include "slurm/process.h"
#include "slurm/slurm_client.h"

namespace dlscale {

namespace {

// A local job: TERM to its process group (the job runs in a session of its
// own, so this reaches the script, dlscale and any mpirun ranks), KILL if it
// is still there after 10 s. A local sweep's pid is the `dlscale sweep`
// process itself, in the user's session: TERM to it alone, and it stops its
// trials (up to 10 s each); KILL only if it is still there after 20 s.
void stop_local_job(const JobRecord& job) {
  const bool sweep = job.array_size > 0;
  const pid_t target = sweep ? static_cast<pid_t>(job.pid) : -static_cast<pid_t>(job.pid);
  kill(target, SIGTERM);
  const int ticks = sweep ? 200 : 100;
  for (int i = 0; i < ticks && local_job_alive(job); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (local_job_alive(job)) kill(target, SIGKILL);
}

}  // namespace

bool cancel_job(const JobRecord& job) {
  SlurmView slurm;
  if (job.type == "slurm") slurm = query_slurm();
  JobStatus status = job_status(job, slurm);
  if (is_finished(status.state)) return false;
  if (job.type == "slurm") {
    if (job.slurm_id.empty()) fail("job " + job.folder + " was never submitted (no Slurm job id in its job.json)");
    scancel(job.slurm_id);
    write_record(job.dir, "cancelled", utc_now());
  } else {
    // Marked first: the script's exit trap then records 143, which must read as cancelled, not failed.
    write_record(job.dir, "cancelled", utc_now());
    if (local_job_alive(job)) stop_local_job(job);
  }
  return true;
}

}  // namespace dlscale
