// GPU query for builds without CUDA.
#include "runtime/core/gpu.h"

namespace dlscale {

GpuInfo query_gpus() {
  GpuInfo info;
  info.reason = "this dlscale was built without CUDA (DLSCALE_CUDA=OFF or no toolkit found)";
  return info;
}

}  // namespace dlscale
