// Checkpoints: everything a run needs to continue exactly where it stopped.
// Weights and batch-norm statistics, solver state, the position in training
// (which fixes the learning rate and the sampler's next batch), validation
// patience, and every rank's random streams. Rank 0 writes ckpt-<iteration>.h5
// atomically (temp file, fsync, rename) and keeps the newest K.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "layers/network.h"
#include "runtime/communicator.h"
#include "runtime/loss_scaler.h"
#include "runtime/optimizer.h"

namespace dlscale {

struct TrainingState {
  std::int64_t iteration = 0;       // iterations completed
  std::int64_t epoch = 0;           // the epoch in progress (0-based)
  std::int64_t batch_in_epoch = 0;  // batches of that epoch completed
  std::int64_t samples_seen = 0;
  double best_validation_loss = std::numeric_limits<double>::infinity();
  int validations_without_improvement = 0;
  LossScaleState loss_scale;  // scale 1 and never changed when loss scaling is off
};

// Identifies what a checkpoint may be resumed into.
struct CheckpointIdentity {
  std::string network_hash;  // layers, input and precision: must match to resume
  std::string config_hash;   // all options: a change is allowed, and said
};

// Collective (gathers every rank's random streams); rank 0 writes into dir
// and deletes the oldest checkpoints beyond `keep` (0 keeps all).
void write_checkpoint(const std::string& dir, Network& net, Optimizer& optimizer, const TrainingState& state,
                      const CheckpointIdentity& id, Communicator& comm, int keep);

// The newest checkpoint in dir that opens and is complete; every one skipped
// (corrupt, cut short) adds a warning. "" when there is none.
std::string find_latest_checkpoint(const std::string& dir, std::vector<std::string>& warnings);

// Restores net, optimizer and this rank's random streams from `path` on every
// rank. A different world size re-splits the data (said in notes); a
// different network is an error naming the file.
TrainingState restore_checkpoint(const std::string& path, Network& net, Optimizer& optimizer,
                                 const CheckpointIdentity& id, Communicator& comm, std::vector<std::string>& notes);

}  // namespace dlscale
