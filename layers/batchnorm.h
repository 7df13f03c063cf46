// Batch normalization: `batchnorm [momentum=0.1] [epsilon=1e-5]`.
// Input (N, C, H, W) normalizes per channel over N, H, W; input (N, F)
// per feature over N. y = scale * (x - mean) / sqrt(var + epsilon) + offset.
// Training uses the batch statistics and folds them into running_mean and
// running_var (unbiased variance, as PyTorch); inference uses the running ones.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_batchnorm(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
