// Learned positional embedding: `posembedding`. Input and output N×T×C;
// y[n,t,:] = x[n,t,:] + P[t,:] with P (T×C) learned, so the context length
// T is fixed by the network's input shape.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_posembedding(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
