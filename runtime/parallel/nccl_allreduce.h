// NCCL all-reduce for GPU ranks (the gradient path when every computing rank
// has a GPU): one NCCL communicator per job whose unique id rank 0 creates
// and broadcasts over MPI, and reductions queued on a stream of their own so
// they overlap the backward pass running on the compute stream. The CUDA
// build has it in nccl_allreduce.cu; the stub build throws "not compiled".
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "runtime/parallel/communicator.h"
#include "runtime/core/tensor.h"

namespace dlscale {

class NcclAllreduce {
 public:
  // Collective over comm; `device` is this rank's GPU (ExecutionPlan::gpu_index).
  // deterministic: NCCL_ALGO as runtime/parallel/nccl_env.h says, before NCCL starts.
  // premul_factor != 1: every rank's input is multiplied by it before the sum
  // (ncclRedOpCreatePreMulSum), the DLSCALE_GPU_REDUCE=nccl-x2 test hook.
  NcclAllreduce(Communicator& comm, int device, bool deterministic = false, float premul_factor = 1.0f);
  ~NcclAllreduce();
  NcclAllreduce(const NcclAllreduce&) = delete;
  NcclAllreduce& operator=(const NcclAllreduce&) = delete;

  // Queues an in-place sum of `count` elements at device pointer `data` on
  // the NCCL stream, ordered after everything already queued on
  // `compute_stream` (a cudaStream_t; nullptr: the default stream).
  void start(void* data, std::size_t count, DType dtype, void* compute_stream);
  // Blocks until every started reduction has finished.
  void wait();

  static bool compiled();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Copies `host` to this rank's GPU, sums it over comm with NCCL and copies it
// back: the end-to-end check the GPU tests and bench/gpu_check.sh run.
std::vector<float> nccl_allreduce_roundtrip(Communicator& comm, int device, const std::vector<float>& host);

}  // namespace dlscale
