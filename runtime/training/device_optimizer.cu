// The solver step on device parameters, state mirrored from the host Optimizer.
#include <cmath>
#include <string>

#include "runtime/training/device_optimizer.cuh"
#include "runtime/core/gpu_context.h"

namespace dlscale {

DeviceOptimizer::DeviceOptimizer(Optimizer& host, const std::vector<Param*>& host_params,
                                 std::vector<gpu::DeviceParam> params, GpuContext& ctx)
    : host_(host), ctx_(ctx), params_(std::move(params)) {
  host.prepare(host_params);  // creates the state tensors a checkpoint fills
  const std::size_t n = params_.size();
  velocity_.assign(n, nullptr), mean_.assign(n, nullptr), sq_mean_.assign(n, nullptr);
  // Names are "param<K>.<what>" (runtime/training/optimizer.cpp) and "step" for adam.
  for (auto& [name, tensor] : host.state()) {
    if (name == "step") {
      step_count_ = tensor;
      continue;
    }
    const auto dot = name.find('.');
    DLSCALE_REQUIRE(name.rfind("param", 0) == 0 && dot != std::string::npos, "unknown solver state '" + name + "'");
    const std::size_t k = std::stoul(name.substr(5, dot - 5));
    const std::string what = name.substr(dot + 1);
    DLSCALE_REQUIRE(k < n && tensor->numel() == params_[k].count, "solver state '" + name + "' does not fit");
    state_.emplace_back(tensor, ctx.alloc(tensor->bytes()));
    float* device = state_.back().second.as<float>();
    if (what == "velocity") velocity_[k] = device;
    else if (what == "average_grad") mean_[k] = device;
    else if (what == "average_sq_grad") sq_mean_[k] = device;
    else fail("unknown solver state '" + name + "'");
  }
  from_host();
}

void DeviceOptimizer::step(double learn_rate) {
  const SolverOptions& o = host_.options();
  DLSCALE_REQUIRE(std::isfinite(learn_rate) && learn_rate >= 0.0, "learning rate must be a finite number >= 0");
  if (o.l2_regularization > 0.0)
    for (const auto& p : params_)
      if (p.regularize) gpu::add_weight_decay(ctx_, p.grad, p.value, p.count, o.l2_regularization);
  if (std::isfinite(o.gradient_threshold))
    gpu::clip_gradients(ctx_, params_, o.gradient_threshold, o.gradient_threshold_method);
  if (o.solver == "sgdm") {
    for (std::size_t k = 0; k < params_.size(); ++k)
      gpu::sgdm_update(ctx_, params_[k].value, params_[k].grad, velocity_[k], params_[k].count, o.momentum,
                       learn_rate);
  } else if (o.solver == "adam") {
    double& t = step_count_->data<double>()[0];
    t += 1.0;
    for (std::size_t k = 0; k < params_.size(); ++k)
      gpu::adam_update(ctx_, params_[k].value, params_[k].grad, mean_[k], sq_mean_[k], params_[k].count,
                       o.gradient_decay, o.squared_gradient_decay, o.epsilon, learn_rate, t);
  } else if (o.solver == "rmsprop") {
    for (std::size_t k = 0; k < params_.size(); ++k)
      gpu::rmsprop_update(ctx_, params_[k].value, params_[k].grad, sq_mean_[k], params_[k].count,
                          o.squared_gradient_decay, o.epsilon, learn_rate);
  } else {
    fail("unknown solver '" + o.solver + "'");
  }
}

void DeviceOptimizer::to_host() {
  for (auto& [tensor, buffer] : state_) ctx_.download(tensor->raw(), buffer.get(), tensor->bytes());
}

void DeviceOptimizer::from_host() {
  for (auto& [tensor, buffer] : state_) ctx_.upload(buffer.get(), tensor->raw(), tensor->bytes());
  ctx_.synchronize();
}

}  // namespace dlscale
