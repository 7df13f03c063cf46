// The dlscale subcommands; each parses its own options and returns the exit code.
#pragma once

#include <string>
#include <vector>

#include "runtime/parallel/communicator.h"
#include "runtime/core/error.h"

namespace dlscale {

using Args = std::vector<std::string>;  // the arguments after the subcommand

int train_command(const Args& args, Communicator& comm);
int shard_command(const Args& args, Communicator& comm);
int predict_command(const Args& args, Communicator& comm);
int generate_command(const Args& args, Communicator& comm);
int info_command(const Args& args, Communicator& comm);
// Cluster profiles and batch jobs (docs/slurm.md).
int profiles_command(const Args& args, Communicator& comm);
int submit_command(const Args& args, Communicator& comm);
int jobs_command(const Args& args, Communicator& comm);
int fetch_command(const Args& args, Communicator& comm);
int cancel_command(const Args& args, Communicator& comm);
// Hyper-parameter sweeps: one training per trial, a ranked results table.
int sweep_command(const Args& args, Communicator& comm);
// report.html of a run directory or a sweep folder (launch/report.h).
int report_command(const Args& args, Communicator& comm);
// Reads a running job's telemetry files only: runs without MPI (a login node, beside the job).
int monitor_command(const Args& args);
// Copies a dataset folder to node-local storage, verified; or keeps a job's
// stage folder until the job ends (io/staging.h). Without MPI, like monitor.
int stage_command(const Args& args);
// Runs before MPI is initialized: it becomes mpirun, whose children must not
// inherit a singleton's MPI state.
int launch_command(const Args& args);

// The mpirun command line that starts `ranks` local ranks of `binary` running
// `command`, bound to cpus/ranks cores each (or unbound when oversubscribed).
std::vector<std::string> mpirun_command(int ranks, int cpus, bool as_root, const std::string& binary,
                                        const Args& command);

}  // namespace dlscale
