// Building and running a Network from its spec.
#include "layers/network.h"

#include <cstdio>
#include <map>
#include <sstream>

#include "layers/layer_spec.h"
#include "layers/registry.h"
#include "runtime/core/rng.h"

namespace dlscale {

namespace {

// y = a + b elementwise (same shape and dtype); y has a's layout.
Tensor add_tensors(const Tensor& a, const Tensor& b_any) {
  const Tensor b = b_any.in_layout(a.layout());
  Tensor y = Tensor::uninitialized(a.shape(), a.dtype(), a.layout());
  dispatch(y.dtype(), [&]<class T>() {
    const T* pa = a.data_any_layout<T>();
    const T* pb = b.data_any_layout<T>();
    T* py = y.data_any_layout<T>();
    const std::int64_t n = y.numel();
#pragma omp parallel for simd if (n > 65536)
    for (std::int64_t i = 0; i < n; ++i) py[i] = pa[i] + pb[i];
  });
  return y;
}

// into += g, where into may be empty (the first gradient to arrive). The sum
// is a new tensor, never written into `into`: both inputs of an add join
// share the join's dy, and layers only read their dy.
void accumulate(Tensor& into, const Tensor& g) { into = into.empty() ? g : add_tensors(into, g); }

Shape with_batch(std::int64_t n, const Shape& sample) {
  Shape s{n};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

}  // namespace

Shape parse_shape(const std::string& text, const std::string& option) {
  Shape shape;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, 'x')) {
    try {
      std::size_t used = 0;
      long long v = std::stoll(part, &used);
      if (used != part.size() || v <= 0) throw std::invalid_argument(part);
      shape.push_back(v);
    } catch (const std::exception&) {
      fail(option + " = '" + text + "' is not a shape like 1x28x28 or 784");
    }
  }
  if (shape.empty()) fail(option + " is empty; give a shape like 1x28x28 or 784");
  return shape;
}

Network::Network(NetworkSpec spec, DType dtype, std::uint64_t seed) : spec_(std::move(spec)), dtype_(dtype) {
  if (spec_.layer_lines.empty()) fail(spec_.source + ": the network has no layers (add 'layer = ...' lines)");
  std::int64_t input_elements = 1;
  for (auto d : spec_.input_shape)
    if (d < 1 || __builtin_mul_overflow(input_elements, d, &input_elements) ||
        input_elements > spec_.max_layer_elements)
      fail(spec_.source + ": input " + to_string(spec_.input_shape) + " is not a shape of 1 to " +
           std::to_string(spec_.max_layer_elements) + " elements per sample");
  Rng rng(seed);
  std::map<std::string, int> by_name;
  // The node `line` names in attribute `key` (input=, from=).
  auto named = [&](const LayerSpec& line, const std::string& key) {
    auto name = line.get_string(key, "");
    if (!by_name.count(name)) line.fail_here(key + "=" + name + " names no earlier layer");
    return by_name[name];
  };
  std::vector<bool> used(spec_.layer_lines.size(), false);
  for (std::size_t i = 0; i < spec_.layer_lines.size(); ++i) {
    auto where = spec_.source + ": layer " + std::to_string(i + 1);
    auto line = LayerSpec::parse(spec_.layer_lines[i], where);
    Node node;
    node.kind = line.kind();
    node.name = line.get_string("name", "layer" + std::to_string(i + 1));
    if (by_name.count(node.name)) line.fail_here("name '" + node.name + "' is used twice");
    node.input = line.has("input") ? named(line, "input") : static_cast<int>(i) - 1;
    const Shape& shape = node.input < 0 ? spec_.input_shape : nodes_[node.input].output_shape;
    if (node.input >= 0) used[node.input] = true;
    if (node.kind == "add") {
      node.add_from = named(line, "from");
      used[node.add_from] = true;
      const Shape& other = nodes_[node.add_from].output_shape;
      if (other != shape)
        line.fail_here("cannot add the output of '" + nodes_[node.add_from].name + "' (" + to_string(other) +
                       ") to " + to_string(shape));
      line.reject_unused();
      node.output_shape = shape;
    } else {
      if (node.kind == "softmax" && i + 1 != spec_.layer_lines.size())
        line.fail_here("softmax must be the last layer");
      LayerContext ctx{shape, dtype_, &rng, static_cast<int>(i), spec_.max_layer_elements};
      node.layer = make_layer(line, ctx);
      node.output_shape = node.layer->output_shape();
    }
    by_name[node.name] = static_cast<int>(i);
    nodes_.push_back(std::move(node));
  }
  if (nodes_.back().kind != "softmax")
    fail(spec_.source + ": the last layer must be softmax (dlscale trains classification networks)");
  // A branch nothing takes would get no gradient and is a typo, usually (an
  // input= or from= naming the wrong layer).
  for (std::size_t i = 0; i + 1 < nodes_.size(); ++i)
    if (!used[i])
      fail(spec_.source + ": layer " + std::to_string(i + 1) + " ('" + nodes_[i].name +
           "'): no later layer takes its output (the next one has input=, and no input= or add from= names it)");
  num_classes_ = nodes_.back().output_shape.back();
  positions_ = numel(nodes_.back().output_shape) / num_classes_;
  // dL/d(network input) is never used: layers reading it may skip it.
  for (auto& node : nodes_)
    if (node.layer && node.input < 0) node.layer->set_input_grad_needed(false);
  // A relu whose input only it reads is applied by that layer if it can
  // (batch norm does, in its own passes over the activations).
  for (std::size_t j = 0; j < nodes_.size(); ++j) {
    const int i = nodes_[j].input;
    if (nodes_[j].kind != "relu" || i < 0 || !nodes_[i].layer) continue;
    int readers = 0;
    for (const auto& n : nodes_) readers += (n.input == i) + (n.add_from == i);
    if (readers == 1 && nodes_[i].layer->fuse_relu()) nodes_[j].applied_by_input = true;
  }
  // Blocked activations may flow between layers: forward_logits converts
  // where a layer reads only plain ones.
  for (auto& node : nodes_)
    if (node.layer) node.layer->set_blocked_output_allowed(true);
  outputs_.resize(nodes_.size());
  output_layouts_.assign(nodes_.size(), Layout::plain);
}

Tensor Network::forward_logits(const Tensor& x, bool training) {
  Shape expected = with_batch(x.rank() ? x.dim(0) : 0, spec_.input_shape);
  if (x.shape() != expected)
    fail("network input is " + to_string(spec_.input_shape) + " per sample but the data gives " + to_string(x.shape()));
  if (x.dtype() != dtype_)
    fail("network parameters are " + to_string(dtype_) + " but the input is " + to_string(x.dtype()));
  for (std::size_t i = 0; i + 1 < nodes_.size(); ++i) {
    Node& node = nodes_[i];
    const Tensor& in = node.input < 0 ? x : outputs_[node.input];
    if (node.applied_by_input)
      outputs_[i] = in;
    else if (!node.layer)
      outputs_[i] = add_tensors(in, outputs_[node.add_from]);
    else if (in.blocked() && !node.layer->takes_blocked_input())
      outputs_[i] = node.layer->forward(in.plain(), training);
    else
      outputs_[i] = node.layer->forward(in, training);
    output_layouts_[i] = outputs_[i].layout();
  }
  const int last = nodes_.back().input;
  return last < 0 ? x : outputs_[last].plain();
}

Tensor Network::predict(const Tensor& x) { return nodes_.back().layer->forward(forward_logits(x, false), false); }

void Network::backward(const Tensor& dlogits, const GradientsReady& on_ready) {
  // grads[j] collects dL/d(output j) from every node that takes output j.
  // Consumers come after their inputs, so going backwards in node order,
  // grads[i] is complete when node i is reached: the reverse of the
  // parameter order, which gradient buckets and DeviceNetwork rely on.
  std::vector<Tensor> grads(nodes_.size());
  const int last = nodes_.back().input;
  if (last >= 0) grads[last] = dlogits;
  for (int i = last; i >= 0; --i) {
    Node& node = nodes_[i];
    DLSCALE_REQUIRE(!grads[i].empty(), "network node " + std::to_string(i + 1) + " got no gradient");
    // dL/dy in the layout of y (a consumer that read a converted copy returned its own).
    Tensor g = grads[i].in_layout(output_layouts_[i]);
    grads[i] = Tensor();
    if (node.applied_by_input) {  // the layer before applied this relu: it takes dy as it is
      grads[node.input] = std::move(g);
      continue;
    }
    if (!node.layer) {  // y = in + out[from]: both get dy
      if (node.input >= 0) accumulate(grads[node.input], g);
      accumulate(grads[node.add_from], g);
      continue;
    }
    if (node.input < 0 && node.layer->params().empty()) continue;  // dL/dx of the data is never needed
    Tensor dx = node.layer->backward(g);  // empty when it reads the data: its input gradient is switched off
    if (on_ready) on_ready(node.layer->params());
    if (node.input >= 0) accumulate(grads[node.input], dx);
  }
  for (auto& o : outputs_) o = Tensor();  // release activations between steps
}

std::vector<Param*> Network::params() {
  std::vector<Param*> all;
  for (auto& node : nodes_)
    if (node.layer)
      for (Param* p : node.layer->params()) all.push_back(p);
  return all;
}

std::vector<Tensor*> Network::buffers() {
  std::vector<Tensor*> all;
  for (auto& node : nodes_)
    if (node.layer)
      for (auto& [name, t] : node.layer->buffers()) all.push_back(t);
  return all;
}

std::vector<std::pair<std::string, Tensor*>> Network::named_tensors() {
  std::vector<std::pair<std::string, Tensor*>> all;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    if (!nodes_[i].layer) continue;
    char prefix[32];
    std::snprintf(prefix, sizeof prefix, "%02zu_", i);
    auto base = prefix + nodes_[i].kind + "/";
    for (Param* p : nodes_[i].layer->params()) all.emplace_back(base + p->name, &p->value);
    for (auto& [name, t] : nodes_[i].layer->buffers()) all.emplace_back(base + name, t);
  }
  return all;
}

std::vector<Rng*> Network::random_streams() {
  std::vector<Rng*> all;
  for (auto& node : nodes_)
    if (node.layer)
      for (Rng* r : node.layer->random_streams()) all.push_back(r);
  return all;
}

std::string Network::random_state() {
  std::string s;
  for (Rng* r : random_streams()) s += (s.empty() ? "" : "|") + r->state();
  return s;
}

void Network::set_random_state(const std::string& state) {
  std::stringstream in(state);
  std::string part;
  for (Rng* r : random_streams()) {
    if (!std::getline(in, part, '|')) fail("a checkpoint holds fewer random streams than the network has");
    r->set_state(part);
  }
}

void Network::decorrelate_random_streams(int rank) {
  if (rank == 0) return;
  for (Rng* r : random_streams()) r->reseed(r->next() + 0x9E3779B97F4A7C15ull * static_cast<std::uint64_t>(rank));
}

std::int64_t Network::parameter_count() {
  std::int64_t n = 0;
  for (Param* p : params()) n += p->value.numel();
  return n;
}

std::string Network::describe() {
  std::ostringstream out;
  char line[200];
  std::snprintf(line, sizeof line, "  %-3s %-10s %-13s %-14s %-10s %s\n", "#", "name", "kind", "output", "learnables",
                "from");
  out << line;
  for (std::size_t i = 0; i < nodes_.size(); ++i) {
    const Node& node = nodes_[i];
    std::int64_t n = 0;
    if (node.layer)
      for (Param* p : node.layer->params()) n += p->value.numel();
    // Named only where the graph is not a chain: input= branches and add joins.
    std::string inputs;
    if (node.input != static_cast<int>(i) - 1 || node.add_from >= 0)
      inputs = node.input < 0 ? "input" : nodes_[node.input].name;
    if (node.add_from >= 0) inputs += " + " + nodes_[node.add_from].name;
    std::snprintf(line, sizeof line, "  %-3zu %-10s %-13s %-14s %-10lld %s\n", i + 1, node.name.c_str(),
                  node.kind.c_str(), to_string(node.output_shape).c_str(), static_cast<long long>(n), inputs.c_str());
    std::string text = line;
    text.erase(text.find_last_not_of(" \n") + 1);
    out << text << "\n";
  }
  out << "  input " << to_string(spec_.input_shape) << ", " << parameter_count() << " learnables, "
      << to_string(dtype_) << "\n";
  return out.str();
}

}  // namespace dlscale
