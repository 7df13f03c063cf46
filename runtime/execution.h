// ExecutionEnvironment resolution: which device this rank computes on.
// The table in docs/architecture.md is the contract.
#pragma once

#include <string>

#include "runtime/gpu.h"

namespace dlscale {

struct ExecutionPlan {
  std::string environment;  // the resolved value, e.g. "parallel-auto" for auto under mpirun
  std::string device;       // "cpu" (GPU compute arrives with the CUDA backend)
  bool computes = true;     // false: this rank idles (parallel-auto with GPUs elsewhere)
  std::string note;         // said once at start, e.g. why auto chose the CPU
};

// `environment` as given by the user; world_size from MPI; gpu from query_gpus().
ExecutionPlan resolve_execution(const std::string& environment, int world_size, const GpuInfo& gpu);

}  // namespace dlscale
