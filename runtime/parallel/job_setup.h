// The start of every training job: each rank reports what it has (host,
// local rank, GPUs, CPU threads), every rank resolves the same JobPlan from
// all reports, and rank 0 gets the one table it prints.
#pragma once

#include <string>
#include <vector>

#include "runtime/parallel/communicator.h"
#include "runtime/parallel/execution.h"

namespace dlscale {

struct JobSetup {
  JobPlan plan;
  std::vector<RankResources> ranks;
  std::vector<int> threads;           // CPU threads per rank
  std::vector<std::string> devices;   // per rank, for summary.json: "cpu (2 threads)", "idle"
  std::string table;                  // rank, host, local, device, threads
  std::vector<std::string> notes;     // said once by rank 0
};

// Collective over comm. Local ranks come from the launcher's variables
// (SLURM_LOCALID, OMPI_COMM_WORLD_LOCAL_RANK) when comm spans the whole job,
// else from MPI's node-local split.
JobSetup setup_job(const std::string& environment, Communicator& comm);

// One rank's report as setup_job allgathers it, and back (exposed for tests).
std::string encode_resources(const RankResources& r, int threads);
RankResources decode_resources(const std::string& text, int& threads);

// Throws Error when this process's MPI_COMM_WORLD is smaller than the world its
// launcher started (split_launch_error in rank_layout.h): tasks that each
// believe they are rank 0 must stop before any of them writes a file.
// setup_job calls it; main calls it for every command that starts MPI.
void refuse_split_launch();

}  // namespace dlscale
