// What GPU support this build and this machine offer. The CUDA build asks the
// runtime; the stub build (DLSCALE_CUDA=OFF) answers "not compiled".
#pragma once

#include <string>

namespace dlscale {

struct GpuInfo {
  bool compiled = false;   // the CUDA backend is in this build
  int device_count = 0;    // usable devices (0 without a driver)
  std::string reason;      // why there is no usable GPU, when device_count == 0
  std::string libraries;   // "CUDA runtime 13000, cuBLAS ..., cuDNN ..., NCCL ..."
};

GpuInfo query_gpus();

}  // namespace dlscale
