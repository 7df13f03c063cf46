// PLACEHOLDER: being written; replace this whole file.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_dense(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
