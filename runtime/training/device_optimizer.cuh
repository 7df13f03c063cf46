// DeviceOptimizer: the run's Optimizer (runtime/training/optimizer.h) stepping device
// parameters with the update kernels of runtime/training/cuda_optimizer.h. The host
// Optimizer keeps the options and the state layout checkpoints use; this
// class holds device copies of its state tensors and moves them with
// to_host() / from_host(), as DeviceNetwork does for the parameters.
// CUDA sources only (runtime/training/device_optimizer.cu).
#pragma once

#include <vector>

#include "runtime/training/cuda_optimizer.h"
#include "runtime/training/optimizer.h"

namespace dlscale {

class DeviceOptimizer {
 public:
  // host_params and params are the same parameters, host and device, in one order.
  DeviceOptimizer(Optimizer& host, const std::vector<Param*>& host_params, std::vector<gpu::DeviceParam> params,
                  GpuContext& ctx);
  // Optimizer::step's order: weight decay, clipping, then the solver's rule.
  void step(double learn_rate);
  void to_host();
  void from_host();

 private:
  Optimizer& host_;
  GpuContext& ctx_;
  std::vector<gpu::DeviceParam> params_;
  std::vector<std::pair<Tensor*, DeviceBuffer>> state_;  // device copy of every per-parameter state tensor
  std::vector<float*> velocity_, mean_, sq_mean_;         // per parameter, by solver
  Tensor* step_count_ = nullptr;                          // adam's, kept on the host
};

}  // namespace dlscale
