// Open MPI settings dlscale chooses for its ranks, set in the environment
// before MPI_Init (Open MPI reads OMPI_MCA_* variables there), each only
// where the user chose nothing: a variable already set, which is also how
// `mpirun --mca NAME VALUE` reaches the ranks, wins.
//
// coll_libnbc_iallreduce_algorithm = 1 (ring). GradientBuckets reduces its
// buckets in place with MPI_Iallreduce, and Open MPI's libnbc then always
// takes its binomial tree (a reduce to rank 0 and a broadcast back, the
// whole bucket on every hop): for an in-place call it never considers
// another. The ring moves 2(p-1)/p of the bucket per rank, both directions
// of every link at once; on the test cluster at 5 Gbit/s it reduced 64 MiB
// in 174 ms against the tree's 283 ms at 2 nodes, 570 against 638 ms at 3
// (docs/scaling.md). NCCL, Gloo and Horovod reduce large buffers in rings.
//
// The PMIx fence: under srun --mpi=pmix, Slurm 22.05's tree fence (and the
// default, which uses it) spans only the local node when TreeWidth exceeds
// the step's node count, so MPI_Init returns before the other nodes joined
// and their first message can crash a rank still inside it (seen on the
// test cluster; docs/slurm.md). Job scripts dlscale writes set the ring
// fence; a hand-written srun line may not, and is warned about.
#pragma once

#include <string>

namespace dlscale {

void choose_mpi_defaults();

// The warning for a step of several nodes under srun's PMIx plugin with a
// fence other than ring (arguments: SLURM_PMIX_FENCE; PMIX_NAMESPACE, which
// Slurm's plugin names "slurm.pmix.JOB.STEP" and mpirun otherwise;
// SLURM_STEP_NUM_NODES; each null when unset); empty when there is none.
std::string pmix_fence_warning(const char* fence, const char* pmix_namespace, const char* step_nodes);
// Prints that warning once per job (SLURM_PROCID 0), before MPI_Init.
void warn_about_pmix_fence();

}  // namespace dlscale
