// Builds without CUDA have no GPU training; job_setup never plans a GPU rank there.
#include "runtime/training/gpu_training.h"

namespace dlscale {

std::unique_ptr<GpuTraining> make_gpu_training(Network&, Optimizer&, GradientBuckets&, Communicator& comm,
                                               const GpuTrainingOptions&) {
  fail("rank " + std::to_string(comm.rank()) + ": this dlscale was built without CUDA (DLSCALE_CUDA=OFF), so it "
       "cannot train on a GPU; use execution-environment=cpu or rebuild with the CUDA toolkit");
}

}  // namespace dlscale
