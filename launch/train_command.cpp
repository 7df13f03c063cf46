// dlscale train: options → trainnet → run directory.
#include <iostream>

#include "launch/commands.h"
#include "launch/cpu_binding.h"
#include "launch/train_options.h"
#include "runtime/blas.h"
#include "runtime/preemption.h"
#include "runtime/trainer.h"

namespace dlscale {

int train_command(const Args& args, Communicator& comm) {
  for (const auto& a : args)
    if (a == "--help" || a == "-h") {
      if (comm.rank() == 0) std::cout << training_options_help();
      return 0;
    }
  TrainingOptions options = parse_training_options(args, comm);
  set_cpu_threads(options.threads > 0 ? options.threads : default_cpu_threads(comm));
  install_preemption_handlers();
  TrainingResult result = trainnet(options, comm);
  return result.stop_reason == "preempted" ? kPreemptedExitCode : 0;
}

}  // namespace dlscale
