// GPU training of one rank, as the trainer sees it: the step of a GPU rank
// (batch staged to the device, forward, loss, backward with each gradient
// bucket all-reduced as soon as it is ready, loss-scale check, solver
// update), evaluation batches, and moving parameters, buffers and solver
// state between the device and the host Network and Optimizer, which stay
// the master copy for checkpoints, buffer syncs and the model file.
// The CUDA build has it in runtime/training/gpu_training.cu; without CUDA
// make_gpu_training fails naming the build.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "io/loader.h"
#include "layers/network.h"
#include "layers/softmax.h"
#include "runtime/parallel/communicator.h"
#include "runtime/parallel/gpu_reduce_hook.h"
#include "runtime/parallel/gradient_buckets.h"
#include "runtime/training/loss_scaler.h"
#include "runtime/training/optimizer.h"

namespace dlscale {

struct GpuTrainingOptions {
  int device = 0;              // ExecutionPlan::gpu_index
  // This rank's samples per training batch (DistributedSampler drops partial
  // batches, so every batch has it): the staging slots are made this size.
  std::int64_t batch_size = 0;
  bool deterministic = false;  // deterministic cuDNN algorithms, NCCL_ALGO with a fixed order
  // Gradients are summed with NCCL on the device (every computing rank has a
  // GPU); false: through the host with the MPI buckets (mixed jobs).
  bool nccl = true;
  std::uint64_t dropout_seed = 0;  // differs per rank, as Network::decorrelate_random_streams
  // automatic-mixed: "fp16" or "bf16", the math of the dense and conv2d
  // layers (float32 master weights, gradients and activations); "": float32.
  std::string half_type;
  GpuReduceHook reduce_hook;  // DLSCALE_GPU_REDUCE: forces NCCL (x2) or the host buckets
};

struct GpuStepResult {
  LossResult loss;        // of this rank's samples
  bool step_taken = true; // false: the loss scaler skipped an overflowing step
};

class GpuTraining {
 public:
  virtual ~GpuTraining() = default;
  // One training step on `batch`. `next` (may be null) is copied to the
  // device on the copy stream while this step computes, and the following
  // step must be given it. normalizer divides the loss gradient (global
  // batch / loss scale); iteration is the 0-based step number.
  virtual GpuStepResult step(const Batch& batch, const Batch* next, double normalizer, double learn_rate,
                             std::int64_t iteration, LossScaler* scaler) = 0;
  // Forgets a staged batch that will not be trained (a new epoch's loader).
  virtual void clear_staged() = 0;
  // Loss sums of an evaluation batch (inference forward).
  virtual LossResult evaluate(const Batch& batch) = 0;
  // Device → host Network and Optimizer (waits), and back.
  virtual void to_host() = 0;
  virtual void from_host() = 0;
  // Seconds, over all steps, this rank's host waited for the NCCL gradient
  // sums after its own backward had finished: the time other ranks kept it
  // waiting (and the last bucket's transfer), which telemetry leaves out of
  // compute time (stragglers.h). 0 where the host buckets reduce (their
  // GradientBuckets::exposed_wait_seconds counts it).
  virtual double peer_wait_seconds() const { return 0; }
};

// net holds the parameters every rank starts from (broadcast, maybe
// resumed); optimizer is the run's; buckets the host plan whose layout the
// device gradients follow. Collective over comm when options.nccl.
std::unique_ptr<GpuTraining> make_gpu_training(Network& net, Optimizer& optimizer, GradientBuckets& buckets,
                                               Communicator& comm, const GpuTrainingOptions& options);

}  // namespace dlscale
