// Deterministic mode's NCCL_ALGO (runtime/parallel/nccl_env.h): Ring unless the user
// named algorithms with a fixed reduction order; NVLS in any form, or an
// exclusion list that leaves NCCL free to pick it, is refused naming the
// variable and the rank. Pure environment logic, so it runs without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "expect_error.h"
#include "runtime/parallel/nccl_env.h"

namespace dlscale::testing {
namespace {

TEST(NcclEnv, UnsetMeansRing) {
  EXPECT_EQ(deterministic_nccl_algo(nullptr, 0), "Ring");
  EXPECT_EQ(deterministic_nccl_algo("", 0), "Ring");
}

TEST(NcclEnv, FixedOrderAlgorithmsAreKept) {
  EXPECT_EQ(deterministic_nccl_algo("Ring", 0), "Ring");
  EXPECT_EQ(deterministic_nccl_algo("ring,Tree", 0), "ring,Tree");
  EXPECT_EQ(deterministic_nccl_algo("CollnetDirect,CollnetChain", 0), "CollnetDirect,CollnetChain");
}

TEST(NcclEnv, NvlsIsRefusedNamingTheVariableAndRank) {
  expect_error([] { deterministic_nccl_algo("NVLS", 3); }, "rank 3: deterministic mode");
  expect_error([] { deterministic_nccl_algo("Ring,NVLS", 0); }, "NCCL_ALGO=Ring,NVLS names 'nvls'");
  expect_error([] { deterministic_nccl_algo("NVLSTree", 0); }, "'nvlstree'");
  expect_error([] { deterministic_nccl_algo("^NVLS", 1); }, "NCCL_ALGO=^NVLS leaves NCCL free");
  expect_error([] { deterministic_nccl_algo("Ring,,Tree", 0); }, "names ''");
}

TEST(NcclEnv, ApplySetsTheEnvironment) {
  unsetenv("NCCL_ALGO");
  apply_deterministic_nccl_algo(0);
  ASSERT_NE(std::getenv("NCCL_ALGO"), nullptr);
  EXPECT_EQ(std::string(std::getenv("NCCL_ALGO")), "Ring");
  setenv("NCCL_ALGO", "Tree", 1);
  apply_deterministic_nccl_algo(0);
  EXPECT_EQ(std::string(std::getenv("NCCL_ALGO")), "Tree");
  setenv("NCCL_ALGO", "NVLS", 1);
  expect_error([] { apply_deterministic_nccl_algo(2); }, "rank 2");
  EXPECT_EQ(std::string(std::getenv("NCCL_ALGO")), "NVLS") << "a refused value is left as the user set it";
  unsetenv("NCCL_ALGO");
}

}  // namespace
}  // namespace dlscale::testing
