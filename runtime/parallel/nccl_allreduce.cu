// NCCL all-reduce on its own stream, with the unique id broadcast over MPI.
#include <string>

#include "runtime/core/cuda_check.h"
#include "runtime/parallel/nccl_allreduce.h"
#include "runtime/parallel/nccl_env.h"

namespace dlscale {

struct NcclAllreduce::State {
  int device = 0;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  cudaEvent_t ready = nullptr;
  // ncclSum, or the pre-multiplied sums of the test hook (one per element type).
  ncclRedOp_t op_f32 = ncclSum, op_f64 = ncclSum;
  // Waits on NCCL are collective waits: a rank that stopped answering leaves
  // the others blocked in them, so they run under the job's watchdog.
  CollectiveWatchdog* watchdog = nullptr;
};

NcclAllreduce::NcclAllreduce(Communicator& comm, int device, bool deterministic, float premul_factor)
    : state_(std::make_unique<State>()) {
  if (deterministic) apply_deterministic_nccl_algo(comm.rank());
  state_->device = device;
  state_->watchdog = comm.watchdog();
  DLSCALE_CHECK_CUDA(cudaSetDevice(device));
  ncclUniqueId id;
  if (comm.rank() == 0) DLSCALE_CHECK_NCCL(ncclGetUniqueId(&id));
  std::string bytes(reinterpret_cast<const char*>(&id), sizeof id);
  comm.broadcast(bytes, 0);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(&id));
  {
    WatchedWait wait(state_->watchdog, "NCCL communicator setup (ncclCommInitRank)");
    DLSCALE_CHECK_NCCL(ncclCommInitRank(&state_->comm, comm.size(), id, comm.rank()));
  }
  if (premul_factor != 1.0f) {
    // Host-immediate scalars: NCCL copies them when the op is created.
    double factor64 = premul_factor;
    DLSCALE_CHECK_NCCL(
        ncclRedOpCreatePreMulSum(&state_->op_f32, &premul_factor, ncclFloat, ncclScalarHostImmediate, state_->comm));
    DLSCALE_CHECK_NCCL(
        ncclRedOpCreatePreMulSum(&state_->op_f64, &factor64, ncclDouble, ncclScalarHostImmediate, state_->comm));
  }
  // A non-blocking stream of its own: reductions overlap the compute stream.
  DLSCALE_CHECK_CUDA(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
  DLSCALE_CHECK_CUDA(cudaEventCreateWithFlags(&state_->ready, cudaEventDisableTiming));
}

NcclAllreduce::~NcclAllreduce() {
  if (!state_) return;
  if (state_->stream) cudaStreamSynchronize(state_->stream);
  if (state_->comm && state_->op_f32 != ncclSum) ncclRedOpDestroy(state_->op_f32, state_->comm);
  if (state_->comm && state_->op_f64 != ncclSum) ncclRedOpDestroy(state_->op_f64, state_->comm);
  if (state_->comm) ncclCommDestroy(state_->comm);
  if (state_->ready) cudaEventDestroy(state_->ready);
  if (state_->stream) cudaStreamDestroy(state_->stream);
}

void NcclAllreduce::start(void* data, std::size_t count, DType dtype, void* compute_stream) {
  // The gradients are final once the compute stream reaches this point.
  DLSCALE_CHECK_CUDA(cudaEventRecord(state_->ready, static_cast<cudaStream_t>(compute_stream)));
  DLSCALE_CHECK_CUDA(cudaStreamWaitEvent(state_->stream, state_->ready, 0));
  const bool f64 = dtype == DType::f64;
  DLSCALE_CHECK_NCCL(ncclAllReduce(data, data, count, f64 ? ncclDouble : ncclFloat,
                                   f64 ? state_->op_f64 : state_->op_f32, state_->comm, state_->stream));
}

void NcclAllreduce::wait() {
  WatchedWait wait(state_->watchdog, "the NCCL gradient all-reduce");
  DLSCALE_CHECK_CUDA(cudaStreamSynchronize(state_->stream));
}

bool NcclAllreduce::compiled() { return true; }

std::vector<float> nccl_allreduce_roundtrip(Communicator& comm, int device, const std::vector<float>& host) {
  NcclAllreduce reducer(comm, device);
  float* buffer = nullptr;
  const std::size_t bytes = host.size() * sizeof(float);
  DLSCALE_CHECK_CUDA(cudaMalloc(&buffer, bytes));
  std::vector<float> out(host.size());
  try {
    DLSCALE_CHECK_CUDA(cudaMemcpy(buffer, host.data(), bytes, cudaMemcpyHostToDevice));
    reducer.start(buffer, host.size(), DType::f32, nullptr);
    reducer.wait();
    DLSCALE_CHECK_CUDA(cudaMemcpy(out.data(), buffer, bytes, cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(buffer);
    throw;
  }
  cudaFree(buffer);
  return out;
}

}  // namespace dlscale
