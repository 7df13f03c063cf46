#include "runtime/parallel/mpi_env.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dlscale {

void choose_mpi_defaults() {
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
}

std::string pmix_fence_warning(const char* fence, const char* pmix_namespace, const char* step_nodes) {
  const bool slurm_pmix = pmix_namespace && std::strncmp(pmix_namespace, "slurm.pmix.", 11) == 0;
  if (!slurm_pmix || !step_nodes || std::atoi(step_nodes) < 2) return "";
  if (fence && std::strcmp(fence, "ring") == 0) return "";
  const std::string which = fence && *fence ? std::string("SLURM_PMIX_FENCE=") + fence : "Slurm's default fence";
  return "dlscale: warning: this step spans " + std::string(step_nodes) + " nodes under srun's PMIx plugin with " +
         which +
         ": Slurm's tree fence can let MPI_Init return before the other nodes joined, and a rank then crashes in "
         "it; set SLURM_PMIX_FENCE=ring before srun (dlscale's job scripts do)\n";
}

void warn_about_pmix_fence() {
  const char* id = std::getenv("SLURM_PROCID");
  if (id && std::strcmp(id, "0") != 0) return;
  const std::string text = pmix_fence_warning(std::getenv("SLURM_PMIX_FENCE"), std::getenv("PMIX_NAMESPACE"),
                                              std::getenv("SLURM_STEP_NUM_NODES"));
  if (!text.empty()) std::fputs(text.c_str(), stderr);
}

}  // namespace dlscale
