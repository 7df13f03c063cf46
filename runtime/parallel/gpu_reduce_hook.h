// DLSCALE_GPU_REDUCE, the test hook that picks a GPU rank's gradient path
// (docs/reliability.md, "Test hooks"). With one rank neither path runs by
// itself (the sum over one rank is the identity, so training skips it), so
// the GPU tests force one:
//   nccl-x2  the device buckets and NCCL, even with one rank, summing with
//            ncclRedOpCreatePreMulSum(2): every gradient comes out doubled,
//            which a test can tell from the plain run;
//   host     the host MPI buckets (gradients downloaded, reduced, uploaded),
//            as a GPU rank of a mixed job does, even with one rank.
// Unset or empty: the usual choice (NCCL when every computing rank has a GPU
// and there are several ranks). Plain C++, so its parsing is tested in CI.
#pragma once

namespace dlscale {

struct GpuReduceHook {
  enum class Path { automatic, nccl, host };
  Path path = Path::automatic;
  float nccl_factor = 1.0f;  // NCCL multiplies every rank's input by it before summing
};

// value: the variable's value (null: unset). Anything else is a UsageError
// naming the variable and the accepted values.
GpuReduceHook parse_gpu_reduce_hook(const char* value);
GpuReduceHook gpu_reduce_hook_from_environment();

}  // namespace dlscale
