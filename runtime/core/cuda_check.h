// The CUDA branch of the check family (runtime/core/error.h has MPI and HDF5):
// every CUDA runtime, cuBLAS, cuDNN and NCCL call in a .cu file goes through
// one of the DLSCALE_CHECK_* macros below, which throw dlscale::Error with
// the call, file:line, the library's own error text and a sentence for the
// user. Only CUDA sources include this header (it needs the CUDA headers).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "runtime/core/error.h"

namespace dlscale {

// The sentence in front of "(call failed at file:line: detail)": the errors a
// user can act on get advice, the rest say which library failed.
inline const char* cuda_error_sentence(cudaError_t rc) {
  switch (rc) {
    case cudaErrorMemoryAllocation:
      return "the GPU ran out of memory; try a smaller mini-batch-size";
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
      return "no usable GPU for this rank; check the driver, CUDA_VISIBLE_DEVICES and execution-environment";
    case cudaErrorLaunchOutOfResources:
    case cudaErrorInvalidConfiguration:
      return "a dlscale GPU kernel could not be launched with these shapes";
    default:
      return "a CUDA call failed";
  }
}

inline void check_cuda(cudaError_t rc, const char* call, const char* file, int line) {
  if (rc == cudaSuccess) return;
  cudaGetLastError();  // clears a non-sticky error so the next call starts clean
  fail_call(cuda_error_sentence(rc), call, std::string(cudaGetErrorName(rc)) + ": " + cudaGetErrorString(rc), file,
            line);
}

inline void check_cublas(cublasStatus_t rc, const char* call, const char* file, int line) {
  if (rc == CUBLAS_STATUS_SUCCESS) return;
  const char* sentence = rc == CUBLAS_STATUS_ALLOC_FAILED
                             ? "cuBLAS ran out of GPU memory; try a smaller mini-batch-size"
                             : "a cuBLAS call failed";
  fail_call(sentence, call, cublasGetStatusString(rc), file, line);
}

inline void check_cudnn(cudnnStatus_t rc, const char* call, const char* file, int line) {
  if (rc == CUDNN_STATUS_SUCCESS) return;
  const char* sentence = rc == CUDNN_STATUS_ALLOC_FAILED
                             ? "cuDNN ran out of GPU memory; try a smaller mini-batch-size"
                         : rc == CUDNN_STATUS_NOT_SUPPORTED
                             ? "cuDNN does not support this layer configuration on this GPU"
                             : "a cuDNN call failed";
  fail_call(sentence, call, cudnnGetErrorString(rc), file, line);
}

inline void check_nccl(ncclResult_t rc, const char* call, const char* file, int line) {
  if (rc == ncclSuccess) return;
  const char* sentence = rc == ncclSystemError || rc == ncclRemoteError
                             ? "the NCCL all-reduce failed on this or another rank (network or peer process)"
                             : "an NCCL call failed";
  fail_call(sentence, call, ncclGetErrorString(rc), file, line);
}

}  // namespace dlscale

#define DLSCALE_CHECK_CUDA(call) ::dlscale::check_cuda((call), #call, __FILE__, __LINE__)
#define DLSCALE_CHECK_CUBLAS(call) ::dlscale::check_cublas((call), #call, __FILE__, __LINE__)
#define DLSCALE_CHECK_CUDNN(call) ::dlscale::check_cudnn((call), #call, __FILE__, __LINE__)
#define DLSCALE_CHECK_NCCL(call) ::dlscale::check_nccl((call), #call, __FILE__, __LINE__)
// After a kernel launch: launch errors are reported at once, execution
// errors at the next synchronizing call.
#define DLSCALE_CHECK_LAUNCH() DLSCALE_CHECK_CUDA(cudaGetLastError())
