// One line of a model spec ("conv2d filters=16 kernel=3 padding=1") and the
// typed, checked access to its attributes that layer factories use.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/rng.h"
#include "runtime/core/tensor.h"

namespace dlscale {

class LayerSpec {
 public:
  // Parses "kind key=value key=value"; `where` names the source for errors
  // (e.g. "cnn.ini: layer 3").
  static LayerSpec parse(const std::string& text, const std::string& where);

  const std::string& kind() const { return kind_; }
  const std::string& text() const { return text_; }
  const std::string& where() const { return where_; }
  bool has(const std::string& key) const { return attrs_.count(key) != 0; }

  // Each getter marks the key as used; a missing key without a default is an error.
  std::int64_t get_int(const std::string& key) const;
  std::int64_t get_int(const std::string& key, std::int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;

  // Throws naming the first attribute no getter asked for (a typo, usually).
  void reject_unused() const;
  // Throws "<where>: <kind>: <message>".
  [[noreturn]] void fail_here(const std::string& message) const;

 private:
  const std::string& raw(const std::string& key) const;

  std::string kind_, text_, where_;
  std::map<std::string, std::string> attrs_;
  mutable std::set<std::string> used_;
};

// The most elements a layer's weight or per-sample output may have: BLAS
// takes 32-bit sizes, and a typo such as units=1000000000 must be an error
// naming the layer before anything is allocated, not a bad_alloc or an
// out-of-memory kill.
inline constexpr std::int64_t kMaxLayerElements = (std::int64_t{1} << 31) - 1;

// What a factory needs to build a layer: the input sample shape (no batch
// dimension), the parameter element type and the initialization stream.
struct LayerContext {
  Shape input_shape;
  DType dtype = DType::f32;
  Rng* rng = nullptr;
  int index = 0;  // position in the network, seeds per-layer randomness (dropout)
  std::int64_t max_elements = kMaxLayerElements;  // lower in tests and fuzzing
};

// Fails through spec when a tensor of `shape` (`what`: "weight", "output")
// would hold more than ctx.max_elements elements; overflow-safe.
void check_layer_size(const LayerSpec& spec, const LayerContext& ctx, const std::string& what, const Shape& shape);
// The same for one size attribute (kernel=, stride=, padding=), checked
// before any arithmetic on it can overflow.
void check_layer_value(const LayerSpec& spec, const LayerContext& ctx, const std::string& key, std::int64_t value);

}  // namespace dlscale
