// DLSCALE_GPU_REDUCE (runtime/parallel/gpu_reduce_hook.h): the test hook that
// forces a GPU rank's gradient path. Parsing only; tests/gpu/train_gpu_test.cpp
// checks what each value does on a GPU.
#include <gtest/gtest.h>

#include <cstdlib>

#include "expect_error.h"
#include "runtime/parallel/gpu_reduce_hook.h"

namespace dlscale::testing {
namespace {

TEST(GpuReduceHook, UnsetOrEmptyKeepsTheUsualChoice) {
  for (const char* v : {static_cast<const char*>(nullptr), ""}) {
    const GpuReduceHook h = parse_gpu_reduce_hook(v);
    EXPECT_EQ(h.path, GpuReduceHook::Path::automatic);
    EXPECT_EQ(h.nccl_factor, 1.0f);
  }
}

TEST(GpuReduceHook, NcclX2ForcesNcclWithFactorTwo) {
  const GpuReduceHook h = parse_gpu_reduce_hook("nccl-x2");
  EXPECT_EQ(h.path, GpuReduceHook::Path::nccl);
  EXPECT_EQ(h.nccl_factor, 2.0f);
}

TEST(GpuReduceHook, HostForcesTheHostBucketsWithoutAFactor) {
  const GpuReduceHook h = parse_gpu_reduce_hook("host");
  EXPECT_EQ(h.path, GpuReduceHook::Path::host);
  EXPECT_EQ(h.nccl_factor, 1.0f);
}

TEST(GpuReduceHook, OtherValuesAreUsageErrorsNamingTheVariable) {
  for (const char* v : {"nccl", "NCCL-X2", "host ", "mpi", "nccl-x3"}) {
    EXPECT_THROW(parse_gpu_reduce_hook(v), UsageError) << v;
    expect_error([&] { parse_gpu_reduce_hook(v); }, std::string("DLSCALE_GPU_REDUCE=") + v + " is not a gradient path");
  }
}

TEST(GpuReduceHook, ReadsTheEnvironment) {
  setenv("DLSCALE_GPU_REDUCE", "host", 1);
  EXPECT_EQ(gpu_reduce_hook_from_environment().path, GpuReduceHook::Path::host);
  unsetenv("DLSCALE_GPU_REDUCE");
  EXPECT_EQ(gpu_reduce_hook_from_environment().path, GpuReduceHook::Path::automatic);
}

}  // namespace
}  // namespace dlscale::testing
