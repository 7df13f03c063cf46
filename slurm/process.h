// Starting other programs (sbatch, squeue, scancel, a local job) from a
// dlscale process. MPI_Init of a singleton adds OMPI_*/PMIX_* variables to the
// environment; a child inheriting them (sbatch exports the environment to the
// job) would think it belongs to this singleton. So children get the current
// environment without the MPI variables (OMPI_, PMIX_, OPAL_, ORTE_, PRTE_)
// that were not there when dlscale started (captured before main runs).
#pragma once

#include <string>
#include <vector>

namespace dlscale {

struct ProgramResult {
  int exit_code = -1;  // 127: the program was not found
  std::string out, err;
};

// The environment for a child, as NAME=value strings (see above).
std::vector<std::string> child_environment();

// Runs argv[0] (looked up in PATH) with child_environment(), waits, and
// returns its exit code and output.
ProgramResult run_program(const std::vector<std::string>& argv);

// Starts argv in a session of its own (so it outlives dlscale and a signal to
// its process group reaches all of it), stdin from /dev/null, stdout and
// stderr appended to `log`. Returns its pid.
long start_detached(const std::vector<std::string>& argv, const std::string& log);

// The kernel's start time of process `pid` (clock ticks since boot), or 0 if
// there is no such live process. A pid plus its start time names one process
// even after the pid is reused.
unsigned long long process_start_time(long pid);

// The absolute path of the running executable.
std::string self_executable();

}  // namespace dlscale
