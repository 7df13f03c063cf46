// Loss and accuracy of a network over a whole dataset, split across ranks and
// reduced, so every rank count gives the single-process figures.
#pragma once

#include <cstdint>
#include <functional>

#include "io/dataset.h"
#include "io/loader.h"
#include "layers/softmax.h"
#include "layers/network.h"
#include "runtime/parallel/communicator.h"

namespace dlscale {

struct EvalResult {
  double loss = 0;      // mean cross-entropy (per token for token data)
  double accuracy = 0;  // fraction correct (of tokens for token data)
  std::int64_t samples = 0;  // predictions: samples, or tokens for token data
};

EvalResult evaluate(Network& net, const DatasetInfo& data, std::int64_t batch_size, Communicator& comm);
// The same with another backend computing each batch's loss sums (the GPU's).
using BatchLoss = std::function<LossResult(const Batch&)>;
EvalResult evaluate(const BatchLoss& batch_loss, DType dtype, const DatasetInfo& data, std::int64_t batch_size,
                    Communicator& comm);

// Fails naming the dataset when its samples do not fit the network.
void check_data_fits(const Network& net, const DatasetInfo& data, const std::string& role);

}  // namespace dlscale
