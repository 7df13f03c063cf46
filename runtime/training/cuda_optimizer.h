// CUDA versions of the solver steps in runtime/training/optimizer.cpp, on device
// float32 arrays of `count` elements: the same formulas with the same float
// rounding (no fused multiply-adds), so one step matches the CPU's to the
// last bit or two. Optimizer::step's order is the caller's: weight decay,
// then clipping, then the update. CUDA builds only (runtime/training/optimizer.cu);
// runtime/training/device_optimizer.cu steps a GPU rank's parameters with them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/device_param.h"
#include "runtime/core/gpu_context.h"

namespace dlscale::gpu {

// grad += l2 * value
void add_weight_decay(GpuContext& ctx, float* grad, const float* value, std::int64_t count, double l2);
// Sum of grad² in double; waits for the result.
double squared_norm(GpuContext& ctx, const float* grad, std::int64_t count);
// grad *= factor
void scale(GpuContext& ctx, float* grad, std::int64_t count, double factor);
// clip_gradients of runtime/training/optimizer.h: method "l2norm" (per parameter) or
// "global-l2norm"; returns the largest norm before clipping.
double clip_gradients(GpuContext& ctx, const std::vector<DeviceParam>& params, double threshold,
                      const std::string& method);

// sgdm: v = momentum*v - lr*g; w += v
void sgdm_update(GpuContext& ctx, float* value, const float* grad, float* velocity, std::int64_t count,
                 double momentum, double learn_rate);
// adam at 1-based step t: m = b1*m + (1-b1)g; v = b2*v + (1-b2)g²;
// w -= lr/(1-b1^t) * m / (sqrt(v/(1-b2^t)) + eps)
void adam_update(GpuContext& ctx, float* value, const float* grad, float* mean, float* sq_mean, std::int64_t count,
                 double gradient_decay, double squared_gradient_decay, double epsilon, double learn_rate,
                 double step);
// rmsprop: v = b2*v + (1-b2)g²; w -= lr * g / (sqrt(v) + eps)
void rmsprop_update(GpuContext& ctx, float* value, const float* grad, float* sq_mean, std::int64_t count,
                    double squared_gradient_decay, double epsilon, double learn_rate);

}  // namespace dlscale::gpu
