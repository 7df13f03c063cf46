// `flatten`: turns each C×H×W (or any) sample into a vector of numel(shape)
// features. It only relabels the shape; the data is shared, never copied.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_flatten(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
