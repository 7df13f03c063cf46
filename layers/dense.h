// Fully connected layer: `dense units=N [bias=true] [per_position=false]`.
// The input sample may have any shape; it is flattened implicitly to F =
// numel(input_shape) features, so a dense layer can follow a conv2d directly.
//   y (N, units) = x (N, F) · Wᵀ + b,  W is (units, F), b is (units)
// per_position=true applies the same W and b at every position of a
// sequence instead: a T×F sample gives T×units (F is the last axis).
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_dense(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
