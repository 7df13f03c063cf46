// `globalavgpool`: the mean of each channel of a C×H×W sample over its H·W
// positions, giving C features (ResNet's head, PyTorch's
// AdaptiveAvgPool2d(1) followed by flatten, MATLAB's
// globalAveragePooling2dLayer without the singleton dimensions), so a dense
// layer can follow directly.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_globalavgpool(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
