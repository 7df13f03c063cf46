// The table of built-in layers. Adding a layer: write its file pair, declare
// its factory in its header and add one row here.
#include "layers/registry.h"

#include <functional>
#include <map>

#include "layers/activations.h"
#include "layers/attention.h"
#include "layers/batchnorm.h"
#include "layers/conv2d.h"
#include "layers/dense.h"
#include "layers/dropout.h"
#include "layers/embedding.h"
#include "layers/flatten.h"
#include "layers/global_avgpool.h"
#include "layers/layernorm.h"
#include "layers/pool2d.h"
#include "layers/positional_embedding.h"
#include "layers/softmax.h"

namespace dlscale {

namespace {
using Factory = std::function<std::unique_ptr<Layer>(const LayerSpec&, const LayerContext&)>;

const std::map<std::string, Factory>& factories() {
  static const std::map<std::string, Factory> table = {
      {"dense", make_dense},         {"conv2d", make_conv2d},   {"maxpool", make_maxpool},
      {"avgpool", make_avgpool},     {"flatten", make_flatten}, {"batchnorm", make_batchnorm},
      {"dropout", make_dropout},     {"relu", make_relu},       {"leakyrelu", make_leakyrelu},
      {"gelu", make_gelu},           {"tanh", make_tanh},       {"sigmoid", make_sigmoid},
      {"softmax", make_softmax},     {"globalavgpool", make_globalavgpool},
      {"embedding", make_embedding}, {"posembedding", make_posembedding},
      {"layernorm", make_layernorm}, {"attention", make_attention},
  };
  return table;
}
}  // namespace

std::vector<std::string> layer_kinds() {
  std::vector<std::string> kinds;
  for (const auto& [kind, factory] : factories()) kinds.push_back(kind);
  kinds.push_back("add");  // handled by Network: it joins two branches
  return kinds;
}

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const LayerContext& ctx) {
  auto it = factories().find(spec.kind());
  if (it == factories().end()) {
    std::string known;
    for (const auto& k : layer_kinds()) known += (known.empty() ? "" : ", ") + k;
    fail(spec.where() + ": unknown layer '" + spec.kind() + "' (known layers: " + known + ")");
  }
  auto layer = it->second(spec, ctx);
  spec.reject_unused();
  return layer;
}

}  // namespace dlscale
