// Everything `dlscale train` (and trainnet) needs, with MATLAB trainingOptions
// defaults. launch/ fills it from the command line and config file.
#pragma once

#include <cstdint>
#include <limits>
#include <string>

#include "io/augment.h"
#include "io/sampler.h"
#include "layers/network.h"
#include "runtime/training/loss_scaler.h"
#include "runtime/training/lr_schedule.h"
#include "runtime/training/optimizer.h"

namespace dlscale {

struct TrainingOptions {
  // Data (dataset folders written by `dlscale shard`).
  std::string train_data, validation_data, test_data;
  // The data folders are node-local copies made by `dlscale stage`: each rank
  // refuses one that does not carry the stage's verification (io/staging.h).
  bool staged_data = false;
  NetworkSpec network;
  AugmentOptions augment;  // training samples only; the trainer draws with `seed` (augment.seed is ignored)

  SolverOptions solver;
  ScheduleOptions schedule;
  int max_epochs = 30;
  std::int64_t mini_batch_size = 128;  // global: split across computing ranks
  ShuffleMode shuffle = ShuffleMode::once;
  std::int64_t validation_frequency = 50;  // iterations
  int validation_patience = std::numeric_limits<int>::max();  // validations without improvement before stopping

  bool verbose = true;
  std::int64_t verbose_frequency = 50;  // iterations

  std::string output;                   // run directory
  std::string checkpoint_path;          // default: <output>/checkpoints
  std::int64_t checkpoint_frequency = 0;  // 0: no checkpoints
  std::string checkpoint_frequency_unit = "epoch";  // epoch | iteration
  double checkpoint_minutes = 0;   // also checkpoint when this much time passed since the last (0: off)
  int checkpoint_keep = 0;         // keep the newest K checkpoints (0: all)
  std::string resume;              // "" | "auto" (newest valid checkpoint in the run directory) | a checkpoint file
  bool overwrite = false;          // a fresh run may set aside an earlier run's checkpoints in its folder

  std::string execution_environment = "auto";
  std::string training_precision = "single";  // single | double | automatic-mixed
  std::string mixed_precision_type = "fp16";  // automatic-mixed: fp16 | bf16
  LossScaleOptions loss_scale;
  std::uint64_t seed = 0;
  bool deterministic = false;
  int threads = 0;  // CPU threads per rank; 0: the CPUs this rank may use
  double collective_timeout_s = 600;  // a collective waiting longer ends the job (0: wait for ever)
  double checkpoint_timeout_s = 3600;  // the other ranks wait this long for rank 0's checkpoint write
  double gradient_bucket_mib = 25;  // gradient all-reduce bucket size (the first bucket is at most 1 MiB)

  // The resolved options as INI text, rerunnable with `dlscale train` as is.
  std::string config_text;

  // What GPU ranks compute dense and conv2d in besides float32:
  // mixed_precision_type under automatic-mixed, else "" (float32 math).
  std::string half_type() const { return training_precision == "automatic-mixed" ? mixed_precision_type : ""; }
};

}  // namespace dlscale
