// Resolution of execution-environment values to a device per rank.
#include "runtime/execution.h"

#include "runtime/error.h"

namespace dlscale {

namespace {
const char* kValues = "auto, cpu, gpu, multi-gpu, parallel-auto, parallel-cpu, parallel-gpu";

// This build trains on the CPU only; the CUDA layer kernels are not written
// yet, so a usable GPU is reported and not used.
std::string cpu_because(const GpuInfo& gpu) {
  if (gpu.device_count == 0) return "training on the CPU: " + gpu.reason;
  return "training on the CPU: " + std::to_string(gpu.device_count) +
         " GPU(s) found, but this version of dlscale has no GPU training kernels yet";
}

[[noreturn]] void no_gpu(const std::string& environment, const GpuInfo& gpu) {
  if (gpu.device_count == 0) fail("execution-environment=" + environment + " needs a GPU, but " + gpu.reason);
  fail("execution-environment=" + environment +
       ": this version of dlscale has no GPU training kernels yet; use cpu, parallel-cpu or auto");
}
}  // namespace

ExecutionPlan resolve_execution(const std::string& environment, int world_size, const GpuInfo& gpu) {
  ExecutionPlan plan;
  plan.device = "cpu";
  if (environment == "auto" || environment == "parallel-auto") {
    plan.environment = (environment == "auto" && world_size == 1) ? "auto" : "parallel-auto";
    plan.note = cpu_because(gpu);
  } else if (environment == "cpu" || environment == "parallel-cpu") {
    plan.environment = environment;
  } else if (environment == "gpu" || environment == "multi-gpu" || environment == "parallel-gpu") {
    no_gpu(environment, gpu);
  } else {
    fail("unknown execution-environment '" + environment + "' (expected one of " + kValues + ")");
  }
  if (environment == "cpu" && world_size > 1)
    fail("execution-environment=cpu runs one process, but this job has " + std::to_string(world_size) +
         " ranks; use parallel-cpu");
  return plan;
}

}  // namespace dlscale
