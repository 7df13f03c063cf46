// trainnet: the training loop of `dlscale train`, data-parallel over the
// ranks of a Communicator, writing the run directory on rank 0.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "layers/network.h"
#include "runtime/parallel/communicator.h"
#include "runtime/training/training_options.h"

namespace dlscale {

struct TrainingResult {
  std::unique_ptr<Network> network;
  std::int64_t iterations = 0;
  int epochs = 0;
  double wall_time_s = 0;
  double samples_per_second = 0;  // training samples over all ranks / training loop time
  std::optional<double> validation_accuracy, validation_loss, test_accuracy, test_loss;
  double final_minibatch_loss = 0;
  std::vector<std::string> devices;  // one per rank
  std::string stop_reason;           // "max epochs", "validation patience", "preempted"
  LossScaleState loss_scale;         // final scale and skipped steps (scale 1 without loss scaling)
  std::string last_checkpoint;       // a preempted run: the checkpoint it stopped at
};

TrainingResult trainnet(const TrainingOptions& options, Communicator& comm);

}  // namespace dlscale
