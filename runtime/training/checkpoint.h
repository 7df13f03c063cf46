// Checkpoints: everything a run needs to continue exactly where it stopped.
// Weights and batch-norm statistics, solver state, the position in training
// (which fixes the learning rate and the sampler's next batch), validation
// patience, and every rank's random streams. Rank 0 writes ckpt-<iteration>.h5
// atomically (temp file, fsync, rename) and keeps the newest K; rank 0 also
// decides which checkpoint a resumed run continues from (docs/reliability.md).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "layers/network.h"
#include "runtime/parallel/communicator.h"
#include "runtime/training/loss_scaler.h"
#include "runtime/training/optimizer.h"

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
  // What the stored position (epoch, batch of the epoch) means: the batch
  // the sampler hands out next follows from these, so a resume that changes
  // one would train part of an epoch twice, skip it, or (a larger batch) find
  // no batch left and never advance. Each is refused naming its option.
  std::int64_t mini_batch_size = 0;
  std::uint64_t seed = 0;
  std::string shuffle;
  bool loss_scaling = false;  // dynamic loss scaling on: a checkpoint without it resumes at initial-loss-scale
};

// The order in which DistributedSampler hands out samples for (seed,
// shuffle, epoch); stored in checkpoints, so a resume into a sampler that
// orders them otherwise is refused. Bump it when the sampler's order changes.
inline constexpr int kSamplerVersion = 1;

// Collective (gathers every rank's random streams); rank 0 writes
// ckpt-<iteration>.h5 into dir and then prunes: of the checkpoints older than
// the one just written it keeps the newest keep - 1 (keep 0 keeps all). The
// one just written, and anything newer, is never deleted. Returns the path of
// the checkpoint (on every rank).
std::string write_checkpoint(const std::string& dir, Network& net, Optimizer& optimizer, const TrainingState& state,
                      const CheckpointIdentity& id, Communicator& comm, int keep);

// A fresh (not resumed) run must not write into a folder holding another
// run's checkpoints: its own would be pruned against them, and a later
// --resume auto could pick the other run's. Rank 0 checks, before anything is
// written: an error unless overwrite, which moves them to dir/set-aside/.
// Collective; notes get what was moved.
void claim_checkpoint_folder(const std::string& dir, bool overwrite, Communicator& comm,
                             std::vector<std::string>& notes);

// Which checkpoint every rank resumes from: rank 0 decides and broadcasts, so
// no rank can resume from another file than the others. resume is "auto" (the
// newest checkpoint in dir that reads back whole; damaged ones are moved to
// dir/set-aside/ with a warning in notes) or a file, whose newer siblings in
// dir are moved aside so a later "auto" cannot jump into the abandoned branch.
// A checkpoint that cannot be read for another reason than its contents (an
// I/O error, a stale NFS handle, a lock) stops the run: falling back to an
// older one would silently lose work. "" when auto finds none. Collective.
std::string choose_resume_checkpoint(const std::string& resume, const std::string& dir, Communicator& comm,
                                     std::vector<std::string>& notes);

// Restores net, optimizer and this rank's random streams from `path` on every
// rank. A different world size re-splits the data (said in notes); a
// different network is an error naming the file. Before returning, every rank
// confirms it restored the same iteration and the same parameters as rank 0.
// A checkpoint whose position means another place in the data with this
// run's options (mini-batch-size, seed, shuffle, sampler version) is refused
// with a UsageError naming the option. fresh_loss_scale is the state loss
// scaling starts from in this run; it is kept when the checkpoint was
// written without loss scaling.
TrainingState restore_checkpoint(const std::string& path, Network& net, Optimizer& optimizer,
                                 const CheckpointIdentity& id, Communicator& comm, std::vector<std::string>& notes,
                                 const LossScaleState& fresh_loss_scale = {});

}  // namespace dlscale
