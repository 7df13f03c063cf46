// A network: the layer list of a model spec built into layers, plus the
// `add from=NAME` joins and `input=NAME` branches that make residual networks
// (with projection shortcuts) declarable. The last layer is softmax; training
// works on the logits before it (fused loss).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {

struct NetworkSpec {
  Shape input_shape;                    // one sample, e.g. {1, 28, 28}
  std::vector<std::string> layer_lines;  // "conv2d filters=16 kernel=3 padding=same", ...
  std::string source = "model spec";    // names the origin in errors ("cnn.ini")
  std::int64_t max_layer_elements = kMaxLayerElements;  // per weight and per-sample output
};

// "1x28x28" → {1, 28, 28}; `option` names the setting in errors.
Shape parse_shape(const std::string& text, const std::string& option);

class Network {
 public:
  // Builds every layer for `dtype` parameters, initialized from `seed`.
  Network(NetworkSpec spec, DType dtype, std::uint64_t seed);

  // Class probabilities (N, K): the full network including softmax.
  Tensor predict(const Tensor& x);
  // Logits (N, K): every layer but the final softmax.
  Tensor forward_logits(const Tensor& x, bool training);
  // Called after each layer's backward with the params whose grads are now
  // final (maybe none): gradient buckets start their all-reduce from here.
  using GradientsReady = std::function<void(const std::vector<Param*>&)>;
  // Back-propagates dL/dlogits of the last forward_logits; fills every grad.
  void backward(const Tensor& dlogits, const GradientsReady& on_ready = {});

  std::vector<Param*> params();
  // Non-learnable state (batch-norm running statistics).
  std::vector<Tensor*> buffers();
  // Parameters and buffers under stable names ("02_conv2d/weight"), the
  // layout of model files and checkpoints.
  std::vector<std::pair<std::string, Tensor*>> named_tensors();
  std::int64_t parameter_count();
  // Every layer's random stream, for checkpoints: states joined by '|'.
  std::string random_state();
  void set_random_state(const std::string& state);
  // Gives every rank its own dropout masks (rank 0 keeps the seed's streams).
  void decorrelate_random_streams(int rank);

  const NetworkSpec& spec() const { return spec_; }
  DType dtype() const { return dtype_; }
  std::int64_t num_classes() const { return num_classes_; }
  // Predictions per sample: 1 for classification, T when the last softmax
  // is T×K (next-token prediction, one label per position).
  std::int64_t positions() const { return positions_; }
  // One line per layer: index, name, kind, output shape, learnables.
  std::string describe();

  // The layer graph, for other backends (layers/device_network.cu): node i
  // takes node `input`'s output: i-1 unless the line says input=NAME, -1
  // for the network input. An add node also takes node add_from's. Every
  // node's output is used by a later node (the last one's by softmax), so
  // backward reaches every node.
  struct Node {
    std::string name;               // user's name= or "layerN"
    std::string kind;
    std::unique_ptr<Layer> layer;   // null for add
    int input = -1;                 // node whose output this one takes (-1: the network input)
    int add_from = -1;              // for add: node whose output is added
    Shape output_shape;
    bool applied_by_input = false;  // a relu the layer before it applies (Layer::fuse_relu)
  };
  const std::vector<Node>& nodes() const { return nodes_; }
  // The layout of each node's output in the last forward (Layout in
  // runtime/core/tensor.h): blocked where oneDNN convolutions handed it on.
  const std::vector<Layout>& output_layouts() const { return output_layouts_; }

 private:
  std::vector<Rng*> random_streams();

  NetworkSpec spec_;
  DType dtype_;
  std::vector<Node> nodes_;
  std::vector<Tensor> outputs_;  // per node, from the last forward (needed by add)
  std::vector<Layout> output_layouts_;  // per node, the layout of its last output (its dL/dy gets the same)
  std::int64_t num_classes_ = 0;
  std::int64_t positions_ = 1;
};

}  // namespace dlscale
