// Layer normalization over the last axis: `layernorm [epsilon=1e-5]`.
// For a T×C sequence each position's C features are normalized to zero mean
// and unit variance (biased, over C), then y = x̂ · scale + offset with
// scale and offset (C) learned. Works on any sample shape; the last axis is C.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_layernorm(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
