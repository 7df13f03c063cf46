// The PMIx fence warning (runtime/parallel/mpi_env.h): a step of several
// nodes under Slurm's PMIx plugin with any fence but ring is warned about
// before MPI_Init; one node, mpirun's PMIx, or the ring fence say nothing.
// Pure environment logic.
#include <gtest/gtest.h>

#include "runtime/parallel/mpi_env.h"

namespace dlscale::testing {
namespace {

constexpr const char* kSlurm = "slurm.pmix.1234.0";

TEST(PmixFence, SeveralNodesWithoutTheRingFenceAreWarnedAbout) {
  for (const char* fence : {static_cast<const char*>(nullptr), "", "tree", "mixed"}) {
    const std::string text = pmix_fence_warning(fence, kSlurm, "4");
    EXPECT_NE(text.find("spans 4 nodes"), std::string::npos) << text;
    EXPECT_NE(text.find("SLURM_PMIX_FENCE=ring"), std::string::npos) << text;
    if (fence && *fence) EXPECT_NE(text.find(std::string("SLURM_PMIX_FENCE=") + fence), std::string::npos) << text;
  }
}

TEST(PmixFence, RingOneNodeAndMpirunSayNothing) {
  EXPECT_EQ(pmix_fence_warning("ring", kSlurm, "4"), "");
  EXPECT_EQ(pmix_fence_warning("tree", kSlurm, "1"), "");
  EXPECT_EQ(pmix_fence_warning("tree", kSlurm, nullptr), "");
  EXPECT_EQ(pmix_fence_warning("tree", "prterun-node1-4242@1", "4"), "") << "mpirun's own PMIx server";
  EXPECT_EQ(pmix_fence_warning("tree", nullptr, "4"), "") << "not PMIx";
}

}  // namespace
}  // namespace dlscale::testing
