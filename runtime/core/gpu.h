// What GPU support this build and this machine offer. The CUDA build asks the
// runtime; the stub build (DLSCALE_CUDA=OFF) answers "not compiled".
#pragma once

#include <string>
#include <vector>

namespace dlscale {

struct GpuInfo {
  bool compiled = false;   // the CUDA backend is in this build
  int device_count = 0;    // usable devices (0 without a driver)
  std::string reason;      // why there is no usable GPU, when device_count == 0
  std::string libraries;   // "CUDA runtime 13000, cuBLAS ..., cuDNN ..., NCCL ..."
  // PCI bus id of each usable device in CUDA's order ("0000:17:00.0"; "" where
  // the query failed): the physical GPU behind a device number, which
  // CUDA_VISIBLE_DEVICES renumbers (a cgroup-isolated task sees its GPU as 0).
  // NCCL calls two ranks on one bus id a duplicate GPU.
  std::vector<std::string> bus_ids;
};

GpuInfo query_gpus();

}  // namespace dlscale
