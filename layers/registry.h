// Maps a layer kind in a model spec to the factory that builds it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {

// Builds the layer `spec` names for an input of ctx.input_shape; unknown
// kinds, unknown attributes and impossible shapes are errors naming spec.where().
std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const LayerContext& ctx);

// Every kind make_layer knows, for error messages and docs.
std::vector<std::string> layer_kinds();

}  // namespace dlscale
