// Elementwise activation layers: relu, leakyrelu [alpha=0.01], gelu (exact
// erf form, PyTorch's default), tanh, sigmoid. Output shape = input shape;
// x is (N, ...) of any per-sample shape.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_relu(const LayerSpec& spec, const LayerContext& ctx);
std::unique_ptr<Layer> make_leakyrelu(const LayerSpec& spec, const LayerContext& ctx);
std::unique_ptr<Layer> make_gelu(const LayerSpec& spec, const LayerContext& ctx);
std::unique_ptr<Layer> make_tanh(const LayerSpec& spec, const LayerContext& ctx);
std::unique_ptr<Layer> make_sigmoid(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
