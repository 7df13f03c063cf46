// build_layer: a layer from one model-spec line, as the registry builds it,
// with a seeded initialization stream. Shared by every layer test.
#pragma once

#include <memory>
#include <string>

#include "layers/registry.h"

namespace dlscale::testing {

inline std::unique_ptr<Layer> build_layer(const std::string& line, const Shape& input, DType dtype = DType::f64,
                                          std::uint64_t seed = 1) {
  Rng rng(seed);  // factories use the stream only while building
  return make_layer(LayerSpec::parse(line, "test"), LayerContext{input, dtype, &rng, 0});
}

}  // namespace dlscale::testing
