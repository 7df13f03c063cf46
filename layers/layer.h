// The Layer interface every layer implements, and the learnable parameter.
// Tensors passed between layers are batch-first: N×F or N×C×H×W.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/rng.h"
#include "runtime/core/tensor.h"

namespace dlscale {

struct Param {
  std::string name;        // "weight", "bias", "scale", "offset"
  Tensor value;
  Tensor grad;             // same shape and dtype as value
  bool regularize = true;  // L2 regularization applies (false for biases and batch-norm terms)
};

class Layer {
 public:
  virtual ~Layer() = default;
  Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;

  // The layer's name in model specs ("dense", "conv2d", ...).
  virtual std::string kind() const = 0;
  // Shape of one output sample (without the batch dimension).
  const Shape& output_shape() const { return output_shape_; }

  // Computes y from x and keeps what backward needs. training selects
  // batch statistics (batchnorm) and masking (dropout).
  virtual Tensor forward(const Tensor& x, bool training) = 0;
  // Given dL/dy of the last forward, overwrites every param's grad with
  // dL/dparam and returns dL/dx.
  virtual Tensor backward(const Tensor& dy) = 0;

  virtual std::vector<Param*> params() { return {}; }
  // Non-learnable state saved with the model (batch-norm running statistics).
  virtual std::vector<std::pair<std::string, Tensor*>> buffers() { return {}; }

  // Random streams the layer draws from while training (dropout masks), so
  // checkpoints can save and restore them.
  virtual std::vector<Rng*> random_streams() { return {}; }

  // The hyper-parameters the layer resolved from its spec line, defaults
  // applied ("size", "stride", "momentum", ...): what another backend (the
  // GPU's, layers/device_network.cu) needs to run the same layer without
  // parsing the spec a second time.
  virtual std::map<std::string, double> settings() const { return {}; }

  // The first layer's dL/dx is never used: Network turns it off so layers
  // whose input gradient is costly (conv2d's col2im) can skip it and return
  // an empty tensor from backward.
  void set_input_grad_needed(bool needed) { input_grad_needed_ = needed; }

  // Blocked layouts (Layout in runtime/core/tensor.h). A layer that takes a
  // blocked x returns dL/dx in x's layout, and its backward gets dL/dy in the
  // layout of the y it returned. Network converts a blocked input to plain
  // for a layer that does not take one.
  virtual bool takes_blocked_input() const { return false; }
  // Network offers a layer the ReLU that is the only reader of its output;
  // a layer that accepts applies it itself from then on (forward returns
  // relu(y), backward gets dL/d relu(y)) and Network skips the ReLU.
  virtual bool fuse_relu() { return false; }
  // Network lets layers return blocked outputs (conv2d's oneDNN path); a
  // layer used on its own returns plain ones (layers that take a blocked
  // input keep its layout).
  void set_blocked_output_allowed(bool allowed) { blocked_output_allowed_ = allowed; }

 protected:
  Shape output_shape_;
  bool input_grad_needed_ = true;
  bool blocked_output_allowed_ = false;
};

}  // namespace dlscale
