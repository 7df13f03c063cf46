// The start of every training job: each rank reports what it has (host,
// local rank, GPUs, CPU threads), every rank resolves the same JobPlan from
// all reports, and rank 0 gets the one table it prints.
#pragma once

#include <string>
#include <vector>

#include "runtime/communicator.h"
#include "runtime/execution.h"

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

}  // namespace dlscale
