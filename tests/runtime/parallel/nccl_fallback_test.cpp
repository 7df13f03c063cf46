// Without a GPU (or without CUDA in the build) the NCCL path fails with a
// clear dlscale::Error instead of crashing: the CPU-fallback machines' case.
#include <gtest/gtest.h>

#include "runtime/core/gpu.h"
#include "runtime/parallel/nccl_allreduce.h"

namespace dlscale {
namespace {

TEST(NcclFallback, NoGpuIsAClearError) {
  Communicator comm;
  if (query_gpus().device_count > 0) GTEST_SKIP() << "skipped: a GPU is present (test_nccl_gpu covers it)";
  try {
    NcclAllreduce reducer(comm, 0);
    FAIL() << "constructing an NCCL reducer without a GPU should fail";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(what.find("no usable GPU for this rank") != std::string::npos ||
                what.find("built without CUDA") != std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace dlscale
