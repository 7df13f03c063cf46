// 2-D pooling over each channel of a C×H×W sample:
//   `maxpool size=K [stride=K] [padding=0]`, `avgpool size=K [stride=K] [padding=0]`
// Output C×OH×OW with OH = (H + 2P - K) / S + 1 (floor: a partial window at
// the bottom/right edge is dropped). padding must be smaller than size so
// every window holds at least one real input element.
// maxpool ignores padding; on ties its gradient goes to the first maximum of
// the window (row-major order).
// avgpool always divides by K·K, i.e. padded zeros count (count-include-pad,
// like MATLAB's averagePooling2dLayer with its default PaddingValue 0 and
// PyTorch's default), so a window that overlaps the padding averages toward 0.
#pragma once

#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {
std::unique_ptr<Layer> make_maxpool(const LayerSpec& spec, const LayerContext& ctx);
std::unique_ptr<Layer> make_avgpool(const LayerSpec& spec, const LayerContext& ctx);
}  // namespace dlscale
