// PLACEHOLDER: being written; replace this whole file.
#include "layers/activations.h"

namespace dlscale {
std::unique_ptr<Layer> make_relu(const LayerSpec& spec, const LayerContext&) { spec.fail_here("not implemented yet"); }
std::unique_ptr<Layer> make_leakyrelu(const LayerSpec& spec, const LayerContext&) { spec.fail_here("not implemented yet"); }
std::unique_ptr<Layer> make_gelu(const LayerSpec& spec, const LayerContext&) { spec.fail_here("not implemented yet"); }
std::unique_ptr<Layer> make_tanh(const LayerSpec& spec, const LayerContext&) { spec.fail_here("not implemented yet"); }
std::unique_ptr<Layer> make_sigmoid(const LayerSpec& spec, const LayerContext&) { spec.fail_here("not implemented yet"); }
}  // namespace dlscale
