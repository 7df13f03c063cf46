// GPU query for CUDA builds. Links only the CUDA runtime (never the driver
// library) so the same binary starts on nodes without a GPU or driver.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "runtime/gpu.h"

namespace dlscale {

GpuInfo query_gpus() {
  GpuInfo info;
  info.compiled = true;
  int runtime_version = 0;
  cudaRuntimeGetVersion(&runtime_version);
  int nccl_version = 0;
  ncclGetVersion(&nccl_version);
  info.libraries = "CUDA runtime " + std::to_string(runtime_version) + ", cuBLAS " +
                   std::to_string(CUBLAS_VERSION) + ", cuDNN " + std::to_string(cudnnGetVersion()) +
                   ", NCCL " + std::to_string(nccl_version);
  // Without a driver cudaGetDeviceCount fails and leaves the count untouched.
  int count = 0;
  cudaError_t rc = cudaGetDeviceCount(&count);
  if (rc != cudaSuccess) {
    info.reason = std::string("no usable GPU: ") + cudaGetErrorString(rc);
    cudaGetLastError();  // clear the sticky error so later calls start clean
    return info;
  }
  info.device_count = count;
  if (count == 0) info.reason = "no GPU device found";
  return info;
}

}  // namespace dlscale
