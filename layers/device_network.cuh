// DeviceNetwork: a Network's forward and backward on this rank's GPU,
// through the CUDA layer functions (layers/cuda_layers.h): float32, or with
// the dense and conv2d math in fp16/bf16 (automatic-mixed; everything kept
// in memory stays float32, see MathPrecision). The host
// Network stays the owner of the layer graph, the hyper-parameters (each
// layer's settings()) and the master copy of parameters and buffers that
// checkpoints and model files read; to_host() and from_host() move them.
//
// Device memory: every parameter value in one block (forward order), every
// gradient in another, laid out in reverse forward order (the order backward
// finishes them, the order of GradientBuckets' plan), so each gradient
// bucket is one contiguous range an NCCL all-reduce can take in place.
// Activations come from the context's caching allocator on every step, so
// after the first step no step calls cudaMalloc.
// CUDA sources only (layers/device_network.cu).
#pragma once

#include <cstdint>
#include <functional>
#include <unordered_map>
#include <vector>

#include "layers/cuda_layers.h"
#include "layers/network.h"
#include "runtime/core/device_param.h"
#include "runtime/core/gpu_context.h"

namespace dlscale {

class DeviceNetwork {
 public:
  // Copies host's parameters and buffers to the device. dropout_seed keys
  // the counter-based dropout masks (give every rank its own); math is the
  // precision of the dense and conv2d products.
  DeviceNetwork(Network& host, GpuContext& ctx, std::uint64_t dropout_seed,
                gpu::MathPrecision math = gpu::MathPrecision::f32);

  // Logits (N, K) of the N samples at x (N × input shape, device float32),
  // valid until the next forward. step numbers the dropout masks, so a
  // resumed run draws the masks an uninterrupted one would have.
  const float* forward_logits(const float* x, std::int64_t batch, bool training, std::uint64_t step);
  // Back-propagates dlogits (N, K, device) of the last training forward;
  // overwrites every gradient and calls on_ready with each layer's params
  // (host pointers, as Network::backward does) once their gradients are queued.
  void backward(const float* dlogits, const Network::GradientsReady& on_ready);

  // Device value and gradient of each parameter, in Network::params() order.
  const std::vector<gpu::DeviceParam>& params() const { return params_; }
  const gpu::DeviceParam& device_param(const Param* host_param) const;
  std::int64_t num_classes() const { return host_.num_classes(); }
  // Every gradient as one block: unscaling and the overflow check take one pass.
  float* gradient_block() const { return grads_.as<float>(); }
  std::int64_t gradient_count() const { return gradient_count_; }

  // Parameters and buffers, device → host Network (waits) and back.
  void to_host();
  void from_host();

 private:
  struct NodeState;  // per node: outputs, saved statistics, argmax (layers/device_network.cu)
  // An attention node's four parameters (qkv weight and bias, out weight and bias) and saved tensors.
  gpu::AttentionParams attention_params(const NodeState& s);
  static gpu::AttentionSaved attention_saved(const NodeState& s);

  Network& host_;
  GpuContext& ctx_;
  std::uint64_t dropout_seed_;
  gpu::MathPrecision math_;
  std::vector<Param*> host_params_;
  std::unordered_map<const Param*, std::size_t> index_of_;
  std::vector<gpu::DeviceParam> params_;
  DeviceBuffer values_, grads_;
  std::int64_t gradient_count_ = 0;
  std::vector<std::pair<Tensor*, DeviceBuffer>> buffers_;  // batch-norm running statistics
  std::vector<std::shared_ptr<NodeState>> nodes_;
  const float* input_ = nullptr;  // of the last forward
  std::int64_t batch_ = 0;
  std::uint64_t step_ = 0;
};

}  // namespace dlscale
