// Preemption: SIGTERM or SIGUSR1 (Slurm's --signal) asks the run to stop.
// The handler only sets a flag; at the next step boundary every rank learns
// through one small all-reduce that some rank was signalled, rank 0 writes a
// checkpoint, and the process exits with kPreemptedExitCode.
#pragma once

namespace dlscale {

// Documented in docs/reliability.md: "stopped at a checkpoint, resume me".
constexpr int kPreemptedExitCode = 3;

void install_preemption_handlers();
bool preemption_requested();
void clear_preemption_request();  // tests

}  // namespace dlscale
