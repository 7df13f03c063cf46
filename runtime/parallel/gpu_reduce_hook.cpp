#include "runtime/parallel/gpu_reduce_hook.h"

#include <cstdlib>
#include <string>

#include "runtime/core/error.h"

namespace dlscale {

GpuReduceHook parse_gpu_reduce_hook(const char* value) {
  const std::string v = value ? value : "";
  GpuReduceHook h;
  if (v.empty()) return h;
  if (v == "nccl-x2") {
    h.path = GpuReduceHook::Path::nccl;
    h.nccl_factor = 2.0f;
  } else if (v == "host") {
    h.path = GpuReduceHook::Path::host;
  } else {
    throw UsageError("DLSCALE_GPU_REDUCE=" + v + " is not a gradient path; use nccl-x2 (NCCL even with one rank, "
                     "gradients doubled) or host (the host MPI buckets), or leave it unset");
  }
  return h;
}

GpuReduceHook gpu_reduce_hook_from_environment() { return parse_gpu_reduce_hook(std::getenv("DLSCALE_GPU_REDUCE")); }

}  // namespace dlscale
