// Softmax over the last axis of (N, K) or (N, T, K) logits: the `softmax` layer, and
// the fused softmax + cross-entropy loss the trainer uses (its gradient is
// the simple, stable softmax - onehot, so networks end in logits, not in a
// softmax layer, when trained with it).
#pragma once

#include <cstdint>
#include <memory>

#include "layers/layer.h"
#include "layers/layer_spec.h"

namespace dlscale {

std::unique_ptr<Layer> make_softmax(const LayerSpec& spec, const LayerContext& ctx);

struct LossResult {
  double loss_sum;        // cross-entropy summed over the batch, not averaged
  std::int64_t correct;   // rows whose argmax (first max on ties) equals the label
};

// logits (N, K); labels N values in [0, K). Per-position prediction gives
// logits (N, T, K) and N·T labels (sample-major): every position is one row,
// its label the next token. Writes dlogits (shaped like logits) =
// (softmax - onehot) / normalizer, reallocating it if its shape or dtype
// differ. normalizer is the GLOBAL mini-batch size, so that summing the
// gradients of all ranks gives the gradient of the mean loss (times T for
// per-position logits: the mean is then per token).
// Numerically stable (the row max is subtracted); the loss is in double.
LossResult softmax_cross_entropy(const Tensor& logits, const std::int32_t* labels, double normalizer,
                                 Tensor& dlogits);
// Same loss and accuracy count without gradients (evaluation).
LossResult softmax_cross_entropy_eval(const Tensor& logits, const std::int32_t* labels);
// Row-wise probabilities of (N, K) or (N, T, K) logits.
Tensor softmax(const Tensor& logits);

}  // namespace dlscale
