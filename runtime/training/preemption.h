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

void install_preemption_handlers();
bool preemption_requested();
void clear_preemption_request();  // tests

}  // namespace dlscale
