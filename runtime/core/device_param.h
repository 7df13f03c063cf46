// One parameter of a GPU rank's network on the device: the value and gradient
// arrays a layer writes (layers/device_network) and the solver steps
// (runtime/training/cuda_optimizer.h). Float32, `count` elements each.
#pragma once

#include <cstdint>

namespace dlscale::gpu {

struct DeviceParam {
  float* value = nullptr;
  float* grad = nullptr;
  std::int64_t count = 0;
  bool regularize = true;  // Param::regularize
};

}  // namespace dlscale::gpu
