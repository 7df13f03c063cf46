// Preemption: SIGTERM or SIGUSR1 (Slurm's --signal) asks the run to stop.
// The handler only sets a flag; at the next step boundary every rank learns
// through one small all-reduce that some rank was signalled, rank 0 writes a
// checkpoint, and the process exits with kPreemptedExitCode.
#pragma once

namespace dlscale {

// Documented in docs/reliability.md: "stopped at a checkpoint, resume me".
constexpr int kPreemptedExitCode = 3;
// The file in the run directory that rank 0 of `dlscale train` writes when a
// signal stopped the training at a checkpoint ("iteration N", "checkpoint
// PATH"); a Slurm job script requeues its job when it finds it.
inline constexpr const char* kPreemptedMarker = "preempted";
// The file in the run directory that a rank's collective watchdog writes when
// the other ranks stopped answering (their node rebooted, its link was cut)
// and it ends the job; a Slurm job script requeues a few times on it.
inline constexpr const char* kLostRankMarker = "lost-rank";
// Beside it, written just before it: the silent hosts, one per line (the
// marker's name + "-hosts", CollectiveWatchdog's convention); the job script
// keeps them out of the requeued start.
inline constexpr const char* kLostHostsFile = "lost-rank-hosts";

void install_preemption_handlers();
// How long a signalled process waits for the next step boundary (where it
// checkpoints and exits) before it gives up and exits with
// kStepBoundaryMissedExitCode and a message saying so: a rank computing one
// endless step, or a loop that never reaches a step, must still end on
// SIGTERM. 0: wait for ever. Set by the trainer from collective-timeout.
void set_step_boundary_wait(double seconds);
// Called at each step boundary that saw the request: the bounded wait ends.
void step_boundary_reached();
constexpr int kStepBoundaryMissedExitCode = 143;  // as if SIGTERM had ended it
bool preemption_requested();
void clear_preemption_request();  // tests

}  // namespace dlscale
