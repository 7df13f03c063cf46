// Inverted dropout: `dropout [rate=0.5]`. In training each unit is zeroed
// with probability rate and kept units are scaled by 1/(1-rate), so
// inference is the identity and needs no rescaling.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "layers/layer.h"
#include "layers/layer_spec.h"
#include "runtime/core/rng.h"

namespace dlscale {

std::unique_ptr<Layer> make_dropout(const LayerSpec& spec, const LayerContext& ctx);

// Public so that tests can freeze the mask; networks use it through Layer.
class Dropout final : public Layer {
 public:
  // who names the layer in errors ("cnn.ini: layer 4: dropout").
  Dropout(std::string who, const Shape& input_shape, DType dtype, double rate, std::uint64_t seed);

  std::string kind() const override { return "dropout"; }
  // x, y are (N, ...input_shape).
  Tensor forward(const Tensor& x, bool training) override;
  Tensor backward(const Tensor& dy) override;

  double rate() const { return rate_; }
  std::map<std::string, double> settings() const override { return {{"rate", rate_}}; }
  std::vector<Rng*> random_streams() override { return {&rng_}; }
  // For finite-difference tests only: while frozen, training forwards on an
  // input of the same shape reuse the last mask instead of drawing a new one.
  void freeze_mask(bool frozen) { frozen_ = frozen; }

 private:
  std::string who_;
  DType dtype_;
  double rate_;
  Rng rng_;
  bool frozen_ = false;
  bool masked_ = false;  // the last forward applied mask_
  Tensor mask_;          // (N, ...): 0 or 1/(1-rate), from the last training forward
  Shape last_shape_;
};

}  // namespace dlscale
