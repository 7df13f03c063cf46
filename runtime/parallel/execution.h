// ExecutionEnvironment resolution: which device every rank of the job computes
// on, decided once from every rank's resources so all ranks agree. The table in
// DESIGN.md ("Execution environments") is the contract.
#pragma once

#include <string>
#include <vector>

#include "runtime/core/gpu.h"

namespace dlscale {

// What one rank sees, allgathered by the trainer.
struct RankResources {
  std::string host;
  int local_rank = 0;
  int gpu_count = 0;            // usable CUDA devices visible to this rank (after CUDA_VISIBLE_DEVICES)
  std::string visible_devices;  // CUDA_VISIBLE_DEVICES as set for this rank ("" if unset)
  // device_ids: PCI bus id of each visible device (GpuInfo::bus_ids; empty
  // without CUDA, "" where unknown). It names the physical GPU for binding and
  // for the duplicate check, which CUDA_VISIBLE_DEVICES cannot: every
  // cgroup-isolated task (srun --gpus-per-task=1) sees its GPU as "0".
  // no_gpu_reason: GpuInfo::reason, quoted when the rank has no GPU.
  std::vector<std::string> device_ids;
  std::string no_gpu_reason;
};

struct ExecutionPlan {
  std::string environment;  // resolved value, e.g. "parallel-auto" for auto under mpirun with >1 rank
  std::string device;       // "cpu" or "gpu:<index among this rank's visible devices>"
  int gpu_index = -1;
  bool computes = true;  // false: this rank idles (parallel-auto when other ranks have GPUs)
};

struct JobPlan {
  std::vector<ExecutionPlan> ranks;  // one per rank, index = rank
  std::string note;                  // said once at start by rank 0, may be ""
  // multi-gpu from a single process: how many ranks dlscale should start on
  // this host (one per local GPU); 0 when the job already has its ranks.
  int self_launch_ranks = 0;
  bool all_gpu() const;  // every computing rank is on a GPU (→ NCCL; MPI otherwise)
  int computing_ranks() const;
};

// Resolves every rank's plan from every rank's resources (index = rank).
// gpu_kernels: whether this build can train on GPUs; when false, GPUs are
// reported in the note and never used, and gpu / multi-gpu / parallel-gpu fail.
// Throws dlscale::Error with a sentence naming the option value (and the rank
// and host where one is at fault).
JobPlan resolve_execution(const std::string& environment, const std::vector<RankResources>& ranks, bool gpu_kernels);

// One table (rank, host, local rank, device, bus id, threads,
// CUDA_VISIBLE_DEVICES) for rank 0 to print at start; lines joined by '\n', no
// trailing newline. The bus id column is left out when no rank's is known,
// the threads column when threads_per_rank is empty.
std::string format_rank_table(const std::vector<RankResources>& ranks, const JobPlan& plan,
                              const std::vector<int>& threads_per_rank);

}  // namespace dlscale
