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
#pragma once

namespace dlscale {

void choose_mpi_defaults();

}  // namespace dlscale
