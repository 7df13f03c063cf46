// Every tensor of a network (weights, biases, batch-norm statistics) as
// plain values, in named_tensors() order: two runs compare bit for bit with
// ==, since float32 values are exact in double.
#pragma once

#include <vector>

#include "layers/network.h"

namespace dlscale::testing {

inline std::vector<std::vector<double>> network_weights(Network& net) {
  std::vector<std::vector<double>> all;
  for (auto& [name, t] : net.named_tensors()) {
    std::vector<double> v(t->numel());
    for (std::int64_t i = 0; i < t->numel(); ++i) v[i] = t->at(i);
    all.push_back(std::move(v));
  }
  return all;
}

}  // namespace dlscale::testing
