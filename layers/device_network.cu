// A Network's layer graph run by the CUDA layer functions: the GPU twin of
// Network::forward_logits and Network::backward (layers/network.cpp), node
// for node, with the same add joins and the same skipped input gradient of
// the first layer.
#include <cstring>
#include <string>

#include "layers/conv2d.h"
#include "layers/cuda_layers.h"
#include "layers/device_network.cuh"
#include "runtime/core/gpu_context.cuh"

namespace dlscale {

namespace {

// dst = a + b (dst may be a or b).
__global__ void sum_kernel(float* dst, const float* a, const float* b, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t(blockDim.x) + threadIdx.x; i < n;
       i += std::int64_t(gridDim.x) * blockDim.x)
    dst[i] = a[i] + b[i];
}

void sum_into(GpuContext& ctx, float* dst, const float* a, const float* b, std::int64_t n) {
  if (n == 0) return;
  sum_kernel<<<gpu::blocks_for(n), gpu::kBlock, 0, gpu::stream(ctx)>>>(dst, a, b, n);
  DLSCALE_CHECK_LAUNCH();
}

// SplitMix64's finalizer.
std::uint64_t mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One dropout key per (seed, node, step): masks differ between layers and
// steps and repeat exactly on a rerun (and in backward).
std::uint64_t dropout_key(std::uint64_t seed, std::size_t node, std::uint64_t step) {
  return mix(seed ^ mix(node) ^ mix(step << 20));
}

bool is_activation(const std::string& kind) {
  return kind == "relu" || kind == "leakyrelu" || kind == "gelu" || kind == "tanh" || kind == "sigmoid";
}

double setting(const Layer& layer, const char* name) {
  const auto settings = layer.settings();
  auto it = settings.find(name);
  DLSCALE_REQUIRE(it != settings.end(), layer.kind() + " has no setting '" + name + "'");
  return it->second;
}

}  // namespace

struct DeviceNetwork::NodeState {
  const Network::Node* node = nullptr;
  Shape input_shape;                 // one sample
  std::int64_t in_count = 0, out_count = 0;  // elements per sample
  std::vector<std::size_t> param_index;      // into params_, the layer's params() order
  DeviceBuffer out;                  // this forward's output, unless it aliases the input
  const float* y = nullptr;          // the output: out or the input itself (flatten, inference dropout)
  DeviceBuffer argmax;               // maxpool
  DeviceBuffer save_mean, save_inv_std;      // batchnorm, for backward
  DeviceBuffer xhat, rstd;           // layernorm, for backward
  DeviceBuffer q, k, v, p, o;        // attention, for backward
  float* running_mean = nullptr;     // batchnorm buffers, in buffers_
  float* running_var = nullptr;
  bool training = false;
  // The layer's settings, resolved once (batch is set per step).
  gpu::ConvShape conv;
  gpu::PoolShape pool;
  gpu::BatchNormShape norm;
  gpu::AttentionShape attention;
  // Sequence layers work on rows of the last axis: rows_per_sample rows of
  // `width` inputs each (dense per position, layernorm); embedding gathers
  // rows of `width` = dim from a table of `vocab`.
  std::int64_t rows_per_sample = 1, width = 0, vocab = 0;
  double alpha = 0, momentum = 0, epsilon = 0, rate = 0;

  float* value(DeviceNetwork& net, std::size_t k) const { return net.params_[param_index[k]].value; }
  float* grad(DeviceNetwork& net, std::size_t k) const { return net.params_[param_index[k]].grad; }
  bool has_bias() const { return param_index.size() > 1; }
};

DeviceNetwork::DeviceNetwork(Network& host, GpuContext& ctx, std::uint64_t dropout_seed, gpu::MathPrecision math)
    : host_(host), ctx_(ctx), dropout_seed_(dropout_seed), math_(math), host_params_(host.params()) {
  DLSCALE_REQUIRE(host.dtype() == DType::f32, "the GPU backend trains float32 networks");
  // Values in forward order, gradients in reverse (see the header).
  std::int64_t total = 0;
  for (Param* p : host_params_) total += p->value.numel();
  gradient_count_ = total;
  values_ = ctx.alloc(sizeof(float) * std::max<std::int64_t>(total, 1));
  grads_ = ctx.alloc(sizeof(float) * std::max<std::int64_t>(total, 1));
  ctx.zero(grads_.get(), grads_.bytes());
  params_.resize(host_params_.size());
  std::int64_t value_at = 0, grad_at = total;
  for (std::size_t i = 0; i < host_params_.size(); ++i) {
    const Param& p = *host_params_[i];
    grad_at -= p.value.numel();
    params_[i] = {values_.as<float>() + value_at, grads_.as<float>() + grad_at, p.value.numel(), p.regularize};
    value_at += p.value.numel();
    index_of_[&p] = i;
  }
  for (const auto& node : host.nodes()) {
    const Shape& shape = node.input < 0 ? host.spec().input_shape : host.nodes()[node.input].output_shape;
    auto state = std::make_shared<NodeState>();
    state->node = &node;
    state->input_shape = shape;
    state->in_count = numel(shape);
    state->out_count = numel(node.output_shape);
    if (Layer* layer = node.layer.get()) {
      const std::string& kind = node.kind;
      if (!(kind == "dense" || kind == "conv2d" || kind == "maxpool" || kind == "avgpool" || kind == "batchnorm" ||
            kind == "dropout" || kind == "flatten" || kind == "softmax" || kind == "globalavgpool" ||
            kind == "embedding" || kind == "posembedding" || kind == "layernorm" || kind == "attention" ||
            is_activation(kind)))
        fail(host.spec().source + ": layer '" + node.name + "' (" + kind + ") has no GPU version; train it with "
             "execution-environment=cpu");
      // Only the last softmax is run, fused into the loss (forward_logits stops before it).
      if (kind == "softmax" && &node != &host.nodes().back())
        fail(host.spec().source + ": layer '" + node.name + "' (softmax before the last layer) has no GPU version; "
             "train it with execution-environment=cpu");
      if (kind == "dense" && setting(*layer, "per_position") != 0) {
        state->width = shape.back();
        state->rows_per_sample = state->in_count / state->width;
      } else if (kind == "layernorm") {
        state->width = shape.back();
        state->rows_per_sample = state->in_count / state->width;
        state->epsilon = setting(*layer, "epsilon");
      } else if (kind == "embedding") {
        state->vocab = static_cast<std::int64_t>(setting(*layer, "vocab"));
        state->width = static_cast<std::int64_t>(setting(*layer, "dim"));
      } else if (kind == "attention") {
        state->attention = {0, shape[0], shape[1], static_cast<std::int64_t>(setting(*layer, "heads")),
                            setting(*layer, "causal") != 0};
      } else if (kind == "conv2d") {
        auto* conv = dynamic_cast<Conv2d*>(layer);
        DLSCALE_REQUIRE(conv != nullptr, "conv2d layer of another type");
        const Conv2dGeometry& g = conv->geometry();
        state->conv = {0,        g.channels, g.height,   g.width,      g.filters,   g.kernel,
                       g.stride, g.pad_top,  g.pad_left, g.pad_bottom, g.pad_right, math};
      } else if (kind == "maxpool" || kind == "avgpool") {
        state->pool = {0,
                       shape[0],
                       shape[1],
                       shape[2],
                       static_cast<std::int64_t>(setting(*layer, "size")),
                       static_cast<std::int64_t>(setting(*layer, "stride")),
                       static_cast<std::int64_t>(setting(*layer, "padding"))};
      } else if (kind == "batchnorm") {
        state->norm = {0, shape[0], state->in_count / shape[0]};
        state->momentum = setting(*layer, "momentum");
        state->epsilon = setting(*layer, "epsilon");
      } else if (kind == "leakyrelu") {
        state->alpha = setting(*layer, "alpha");
      } else if (kind == "dropout") {
        state->rate = setting(*layer, "rate");
      }
      for (Param* p : layer->params()) state->param_index.push_back(index_of_.at(p));
      for (auto& [name, t] : layer->buffers()) {
        buffers_.emplace_back(t, ctx.alloc(t->bytes()));
        (name == "running_mean" ? state->running_mean : state->running_var) = buffers_.back().second.as<float>();
      }
    }
    nodes_.push_back(std::move(state));
  }
  from_host();
}

gpu::AttentionParams DeviceNetwork::attention_params(const NodeState& s) {
  return {s.value(*this, 0), s.value(*this, 1), s.value(*this, 2), s.value(*this, 3)};
}

gpu::AttentionSaved DeviceNetwork::attention_saved(const NodeState& s) {
  return {s.q.as<float>(), s.k.as<float>(), s.v.as<float>(), s.p.as<float>(), s.o.as<float>()};
}

const gpu::DeviceParam& DeviceNetwork::device_param(const Param* host_param) const {
  auto it = index_of_.find(host_param);
  DLSCALE_REQUIRE(it != index_of_.end(), "parameter '" + host_param->name + "' is not one of this network's");
  return params_[it->second];
}

const float* DeviceNetwork::forward_logits(const float* x, std::int64_t batch, bool training, std::uint64_t step) {
  input_ = x, batch_ = batch, step_ = step;
  for (std::size_t i = 0; i + 1 < nodes_.size(); ++i) {
    NodeState& s = *nodes_[i];
    const Network::Node& node = *s.node;
    const float* h = node.input < 0 ? x : nodes_[node.input]->y;
    const std::string& kind = node.kind;
    s.training = training;
    s.out = DeviceBuffer();
    s.y = nullptr;
    auto output = [&] {
      s.out = ctx_.alloc(sizeof(float) * std::max<std::int64_t>(batch * s.out_count, 1));
      s.y = s.out.as<float>();
      return s.out.as<float>();
    };
    if (!node.layer) {  // add: y = x + out[from]
      sum_into(ctx_, output(), h, nodes_[node.add_from]->y, batch * s.out_count);
    } else if (kind == "dense") {
      // Per position: batch·T rows of the last axis (rows_per_sample 1 otherwise).
      const std::int64_t rows = batch * s.rows_per_sample;
      gpu::dense_forward(ctx_, h, s.value(*this, 0), s.has_bias() ? s.value(*this, 1) : nullptr, output(), rows,
                         s.in_count / s.rows_per_sample, s.out_count / s.rows_per_sample, math_);
    } else if (kind == "embedding") {
      gpu::embedding_forward(ctx_, h, s.value(*this, 0), output(), batch * s.in_count, s.vocab, s.width);
    } else if (kind == "posembedding") {
      gpu::posembedding_forward(ctx_, h, s.value(*this, 0), output(), batch, s.in_count);
    } else if (kind == "layernorm") {
      const std::int64_t rows = batch * s.rows_per_sample;
      s.xhat = ctx_.alloc(sizeof(float) * std::max<std::int64_t>(batch * s.in_count, 1));
      s.rstd = ctx_.alloc(sizeof(double) * std::max<std::int64_t>(rows, 1));
      gpu::layernorm_forward(ctx_, h, s.value(*this, 0), s.value(*this, 1), output(), s.xhat.as<float>(),
                             s.rstd.as<double>(), rows, s.width, s.epsilon);
    } else if (kind == "attention") {
      s.attention.batch = batch;
      const std::int64_t n = std::max<std::int64_t>(batch * s.in_count, 1), t = s.attention.tokens;
      s.q = ctx_.alloc(sizeof(float) * n), s.k = ctx_.alloc(sizeof(float) * n), s.v = ctx_.alloc(sizeof(float) * n);
      s.o = ctx_.alloc(sizeof(float) * n);
      s.p = ctx_.alloc(sizeof(float) * std::max<std::int64_t>(batch * s.attention.heads * t * t, 1));
      gpu::attention_forward(ctx_, s.attention, h, attention_params(s), output(), attention_saved(s));
    } else if (kind == "conv2d") {
      s.conv.batch = batch;
      gpu::conv2d_forward(ctx_, s.conv, h, s.value(*this, 0), s.has_bias() ? s.value(*this, 1) : nullptr, output());
    } else if (is_activation(kind)) {
      gpu::activation_forward(ctx_, gpu::activation_from_kind(kind), s.alpha, h, output(), batch * s.in_count);
    } else if (kind == "maxpool" || kind == "avgpool") {
      s.pool.batch = batch;
      const bool max = kind == "maxpool";
      if (max) s.argmax = ctx_.alloc(sizeof(std::int32_t) * std::max<std::int64_t>(batch * s.out_count, 1));
      gpu::pool2d_forward(ctx_, max ? gpu::PoolMode::max : gpu::PoolMode::average, s.pool, h, output(),
                          max ? s.argmax.as<std::int32_t>() : nullptr);
    } else if (kind == "globalavgpool") {
      gpu::global_avgpool_forward(ctx_, batch * s.out_count, s.in_count / s.out_count, h, output());
    } else if (kind == "batchnorm") {
      s.norm.batch = batch;
      if (training) {
        s.save_mean = ctx_.alloc(sizeof(float) * s.norm.channels);
        s.save_inv_std = ctx_.alloc(sizeof(float) * s.norm.channels);
        gpu::batchnorm_forward_training(ctx_, s.norm, s.momentum, s.epsilon, h, s.value(*this, 0), s.value(*this, 1),
                                        output(), s.running_mean, s.running_var, s.save_mean.as<float>(),
                                        s.save_inv_std.as<float>());
      } else {
        gpu::batchnorm_forward_inference(ctx_, s.norm, s.epsilon, h, s.value(*this, 0), s.value(*this, 1),
                                         s.running_mean, s.running_var, output());
      }
    } else if (kind == "dropout" && training) {
      gpu::dropout_forward(ctx_, s.rate, dropout_key(dropout_seed_, i, step), 0, h, output(), batch * s.in_count);
    } else {  // flatten, inference dropout: the same values
      s.y = h;
    }
  }
  const int last = nodes_.back()->node->input;
  return last < 0 ? x : nodes_[last]->y;
}

namespace {

// A gradient on the device: a buffer this step allocated, or a pointer into
// one it does not own (the caller's dlogits).
struct Gradient {
  DeviceBuffer owner;
  const float* p = nullptr;
};

// into += g (n floats); into may be empty (the first gradient to arrive).
void add_gradient(GpuContext& ctx, Gradient& into, const float* g, std::int64_t n) {
  if (into.p && !into.owner.empty()) {
    sum_into(ctx, into.owner.as<float>(), into.p, g, n);
    return;
  }
  DeviceBuffer b = ctx.alloc(sizeof(float) * std::max<std::int64_t>(n, 1));
  if (into.p)
    sum_into(ctx, b.as<float>(), into.p, g, n);
  else
    DLSCALE_CHECK_CUDA(cudaMemcpyAsync(b.get(), g, sizeof(float) * n, cudaMemcpyDeviceToDevice, gpu::stream(ctx)));
  into.owner = std::move(b), into.p = into.owner.as<float>();
}

}  // namespace

void DeviceNetwork::backward(const float* dlogits, const Network::GradientsReady& on_ready) {
  const std::int64_t batch = batch_;
  // grads[j] collects dL/d(output j) from every node that takes output j;
  // it is complete when node j is reached (see Network::backward).
  std::vector<Gradient> grads(nodes_.size());
  const int last = nodes_.back()->node->input;
  if (last >= 0) grads[last].p = dlogits;
  for (int i = last; i >= 0; --i) {
    NodeState& s = *nodes_[i];
    const Network::Node& node = *s.node;
    const std::string& kind = node.kind;
    const std::int64_t out_n = batch * s.out_count, in_n = batch * s.in_count;
    Gradient incoming = std::move(grads[i]);
    const float* g = incoming.p;
    DLSCALE_REQUIRE(g != nullptr, "network node " + std::to_string(i + 1) + " got no gradient (GPU)");
    if (!node.layer) {  // y = in + out[from]: both get dy
      if (node.input >= 0) add_gradient(ctx_, grads[node.input], g, out_n);
      add_gradient(ctx_, grads[node.add_from], g, out_n);
      continue;
    }
    if (node.input < 0 && s.param_index.empty()) continue;  // dL/dx of the data is never needed
    const float* x = node.input < 0 ? input_ : nodes_[node.input]->y;
    DeviceBuffer dx_owner;
    auto dx = [&] {
      dx_owner = ctx_.alloc(sizeof(float) * std::max<std::int64_t>(in_n, 1));
      return dx_owner.as<float>();
    };
    const bool need_dx = node.input >= 0;
    if (kind == "dense") {
      gpu::dense_backward(ctx_, x, s.value(*this, 0), g, need_dx ? dx() : nullptr, s.grad(*this, 0),
                          s.has_bias() ? s.grad(*this, 1) : nullptr, batch * s.rows_per_sample,
                          s.in_count / s.rows_per_sample, s.out_count / s.rows_per_sample, math_);
    } else if (kind == "embedding") {
      gpu::embedding_backward(ctx_, x, g, s.grad(*this, 0), batch * s.in_count, s.vocab, s.width);
      if (need_dx) ctx_.zero(dx(), sizeof(float) * in_n);  // token ids have no gradient (as on the CPU)
    } else if (kind == "posembedding") {
      gpu::posembedding_backward(ctx_, g, s.grad(*this, 0), batch, s.in_count);  // dx is dy: handed on below
    } else if (kind == "layernorm") {
      gpu::layernorm_backward(ctx_, g, s.xhat.as<float>(), s.rstd.as<double>(), s.value(*this, 0), dx(),
                              s.grad(*this, 0), s.grad(*this, 1), batch * s.rows_per_sample, s.width);
    } else if (kind == "attention") {
      gpu::attention_backward(ctx_, s.attention, x, g, attention_params(s), attention_saved(s),
                              need_dx ? dx() : nullptr, s.grad(*this, 0), s.grad(*this, 1), s.grad(*this, 2),
                              s.grad(*this, 3));
    } else if (kind == "conv2d") {
      gpu::conv2d_backward(ctx_, s.conv, x, s.value(*this, 0), g, need_dx ? dx() : nullptr, s.grad(*this, 0),
                           s.has_bias() ? s.grad(*this, 1) : nullptr);
    } else if (is_activation(kind)) {
      gpu::activation_backward(ctx_, gpu::activation_from_kind(kind), s.alpha, x, s.y, g, dx(), in_n);
    } else if (kind == "maxpool" || kind == "avgpool") {
      const bool max = kind == "maxpool";
      gpu::pool2d_backward(ctx_, max ? gpu::PoolMode::max : gpu::PoolMode::average, s.pool, g,
                           max ? s.argmax.as<std::int32_t>() : nullptr, dx());
    } else if (kind == "globalavgpool") {
      gpu::global_avgpool_backward(ctx_, out_n, s.in_count / s.out_count, g, dx());
    } else if (kind == "batchnorm") {
      DLSCALE_REQUIRE(s.training, "batchnorm (GPU): backward after an inference forward");
      gpu::batchnorm_backward_training(ctx_, s.norm, s.epsilon, x, g, s.value(*this, 0), s.save_mean.as<float>(),
                                       s.save_inv_std.as<float>(), dx(), s.grad(*this, 0), s.grad(*this, 1));
    } else if (kind == "dropout") {
      DLSCALE_REQUIRE(s.training, "dropout (GPU): backward after an inference forward");
      gpu::dropout_backward(ctx_, s.rate, dropout_key(dropout_seed_, i, step_), 0, g, dx(), in_n);
    }
    if (need_dx) {
      Gradient& into = grads[node.input];
      // flatten, posembedding: dx is dy itself, handed on with its owner.
      Gradient d = dx_owner.empty() ? std::move(incoming) : Gradient{std::move(dx_owner), nullptr};
      if (d.p == nullptr) d.p = d.owner.as<float>();
      if (into.p == nullptr)
        into = std::move(d);
      else
        add_gradient(ctx_, into, d.p, in_n);
    }
    if (on_ready) on_ready(node.layer->params());
  }
  // Activations go back to the cache between steps, as on the CPU.
  for (auto& s : nodes_) {
    s->out = DeviceBuffer(), s->argmax = DeviceBuffer(), s->y = nullptr;
    s->xhat = DeviceBuffer(), s->rstd = DeviceBuffer();
    s->q = DeviceBuffer(), s->k = DeviceBuffer(), s->v = DeviceBuffer(), s->p = DeviceBuffer(), s->o = DeviceBuffer();
  }
}

void DeviceNetwork::to_host() {
  for (std::size_t i = 0; i < host_params_.size(); ++i)
    ctx_.download(host_params_[i]->value.raw(), params_[i].value, host_params_[i]->value.bytes());
  for (auto& [tensor, buffer] : buffers_) ctx_.download(tensor->raw(), buffer.get(), tensor->bytes());
}

void DeviceNetwork::from_host() {
  for (std::size_t i = 0; i < host_params_.size(); ++i)
    ctx_.upload(params_[i].value, host_params_[i]->value.raw(), host_params_[i]->value.bytes());
  for (auto& [tensor, buffer] : buffers_) ctx_.upload(buffer.get(), tensor->raw(), tensor->bytes());
  ctx_.synchronize();  // the copies read pageable host memory the caller may change next
}

}  // namespace dlscale
