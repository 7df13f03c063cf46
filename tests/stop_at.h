// trainnet stopped as a preemption signal would stop it, after iteration
// stop_at (the DLSCALE_STOP_AT test hook, runtime/training/trainer.cpp): the run
// writes a checkpoint there and returns stop_reason "preempted".
#pragma once

#include <cstdlib>
#include <string>

#include "runtime/training/trainer.h"

namespace dlscale::testing {

// stop_at 0: no stop.
inline TrainingResult train_stopping_at(const TrainingOptions& o, Communicator& comm, long stop_at) {
  if (stop_at > 0) setenv("DLSCALE_STOP_AT", std::to_string(stop_at).c_str(), 1);
  TrainingResult r = trainnet(o, comm);
  unsetenv("DLSCALE_STOP_AT");
  return r;
}

}  // namespace dlscale::testing
