// GPU query for CUDA builds. Links only the CUDA runtime (never the driver
// library) so the same binary starts on nodes without a GPU or driver.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "runtime/core/gpu.h"

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
  // Bus ids name the physical GPUs for job_setup's sharing check (NCCL's own
  // duplicate-GPU check compares the same ids); an unknown one stays "".
  for (int device = 0; device < count; ++device) {
    char bus_id[32] = "";
    if (cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, device) != cudaSuccess) {
      cudaGetLastError();
      bus_id[0] = '\0';
    }
    info.bus_ids.emplace_back(bus_id);
  }
  return info;
}

}  // namespace dlscale
