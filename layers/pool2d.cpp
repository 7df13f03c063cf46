// PLACEHOLDER: being written; replace this whole file.
#include "layers/pool2d.h"

namespace dlscale {
std::unique_ptr<Layer> make_maxpool(const LayerSpec& spec, const LayerContext&) { spec.fail_here("not implemented yet"); }
std::unique_ptr<Layer> make_avgpool(const LayerSpec& spec, const LayerContext&) { spec.fail_here("not implemented yet"); }
}  // namespace dlscale
