// Token embedding: `embedding vocab=V dim=C`.
// A sample is T token ids, stored as the network's float type (float32
// holds every integer below 2^24 exactly, far above any byte or BPE vocab):
// input N×T, output N×T×C, row t of sample n is row id[n,t] of W (V×C).
// The ids are rounded to the nearest integer; one outside [0, V) is an error
// naming the sample and position. dL/d(ids) is zero (ids are not
// differentiable), so an embedding belongs first in the network.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_embedding(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
