#include "runtime/parallel/mpi_env.h"

#include <cstdlib>

namespace dlscale {

void choose_mpi_defaults() {
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", /*overwrite=*/0);
}

}  // namespace dlscale
