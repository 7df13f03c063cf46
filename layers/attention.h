// Multi-head self-attention: `attention heads=H [causal=false]`.
// Input and output N×T×C, C divisible by H, head size d = C/H:
//   [Q K V] (T×3C) = x · Wqkvᵀ + bqkv      qkv_weight (3C×C), qkv_bias (3C)
//   per head h: P = softmax(Q_h K_hᵀ / sqrt(d)), O_h = P V_h     (T×T, T×d)
//   y = [O_1 … O_H] · Woutᵀ + bout          out_weight (C×C), out_bias (C)
// Q_h is columns h·d … h·d+d-1 of Q (likewise K, V; the O_h are concatenated
// in head order). causal=true masks key positions after the query (the
// softmax row i covers keys 0…i): what next-token prediction needs.
// The softmax runs in the parameter type (float32 in training, never in
// reduced precision) after subtracting the row max.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_attention(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
