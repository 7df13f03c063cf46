// dlscale train: options → trainnet → run directory.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "io/hdf5.h"
#include "launch/commands.h"
#include "launch/cpu_binding.h"
#include "launch/train_options.h"
#include "runtime/core/blas.h"
#include "runtime/core/heap.h"
#include "runtime/training/preemption.h"
#include "runtime/training/trainer.h"

namespace dlscale {

namespace {

// RUN/preempted, written by rank 0 once trainnet has committed the checkpoint
// it stopped at: the job script requeues on this file, not on srun's exit
// code, which is the highest task code or 128+signal and so cannot say
// "preempted" reliably. Written to a temporary file, flushed and renamed, so
// a reader sees it whole or not at all.
void write_preempted_marker(const TrainingOptions& o, const TrainingResult& result) {
  namespace fs = std::filesystem;
  const fs::path marker = fs::path(o.output) / kPreemptedMarker;
  const std::string tmp = marker.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "iteration " << result.iterations << "\ncheckpoint " << result.last_checkpoint << "\n";
    if (!out.flush()) fail("cannot write the preemption marker " + tmp);
  }
  commit_file(tmp, marker.string());
}

}  // namespace

int train_command(const Args& args, Communicator& comm) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      if (comm.rank() == 0) std::cout << training_options_help();
      return 0;
    }
  TrainingOptions options = parse_training_options(args, comm);
  keep_freed_tensor_memory_mapped();
  set_cpu_threads(options.threads > 0 ? options.threads : default_cpu_threads(comm));
  install_preemption_handlers();
  TrainingResult result = trainnet(options, comm);
  if (result.stop_reason != "preempted") return 0;
  if (comm.rank() == 0) write_preempted_marker(options, result);
  // No rank exits before rank 0 has committed the checkpoint and the marker:
  // under srun --kill-on-bad-exit, the first rank to exit with 3 ends the rest.
  comm.barrier();
  return kPreemptedExitCode;
}

}  // namespace dlscale
