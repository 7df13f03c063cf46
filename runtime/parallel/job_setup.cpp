// Gathering every rank's resources and resolving the job's execution plan.
#include "runtime/parallel/job_setup.h"

#include <unistd.h>

#include <cstdlib>
#include <sstream>

#include "runtime/core/blas.h"
#include "runtime/core/error.h"
#include "runtime/core/gpu.h"
#include "runtime/parallel/rank_layout.h"

namespace dlscale {

namespace {

constexpr char kSep = '\x1f';

// Bus ids ("0000:17:00.0") hold no comma, so one field carries the list.
std::string join_ids(const std::vector<std::string>& ids) {
  std::string out;
  for (const auto& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

std::vector<std::string> split_ids(const std::string& text, int count) {
  std::vector<std::string> ids;
  std::stringstream in(text);
  for (std::string id; std::getline(in, id, ',');) ids.push_back(id);
  if (count > 0) ids.resize(count);  // a trailing empty id (unknown) survives the round trip
  return ids;
}

RankResources my_resources(Communicator& comm, std::vector<std::string>& notes) {
  RankResources mine;
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  mine.host = host;
  mine.local_rank = comm.local_rank();
  int world_size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  RankLayout layout = detect_layout(process_environment());
  if (comm.size() == world_size) {
    int world_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    if (layout.local_rank >= 0) mine.local_rank = layout.local_rank;
    auto warning = check_layout(layout, world_rank, world_size, comm.local_rank(), comm.local_size());
    if (!warning.empty()) notes.push_back("rank " + std::to_string(comm.rank()) + ": " + warning);
    if (!layout.hint.empty() && comm.rank() == 0) notes.push_back(layout.hint);
  }
  mine.visible_devices = layout.visible_devices;
  GpuInfo gpu = query_gpus();
  mine.gpu_count = gpu.device_count;
  mine.no_gpu_reason = gpu.reason;
  mine.device_ids = gpu.bus_ids;
  return mine;
}

}  // namespace

std::string encode_resources(const RankResources& r, int threads) {
  std::ostringstream s;
  s << r.host << kSep << r.local_rank << kSep << r.gpu_count << kSep << r.visible_devices << kSep
    << r.no_gpu_reason << kSep << threads << kSep << join_ids(r.device_ids);
  return s.str();
}

RankResources decode_resources(const std::string& text, int& threads) {
  std::vector<std::string> f;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, kSep);) f.push_back(part);
  f.resize(7);
  RankResources r;
  r.host = f[0];
  r.local_rank = std::stoi(f[1]);
  r.gpu_count = std::stoi(f[2]);
  r.visible_devices = f[3];
  r.no_gpu_reason = f[4];
  threads = std::stoi(f[5]);
  if (!f[6].empty()) r.device_ids = split_ids(f[6], r.gpu_count);
  return r;
}

void refuse_split_launch() {
  int world_size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  if (auto error = split_launch_error(detect_layout(process_environment()), world_size); !error.empty()) fail(error);
}

JobSetup setup_job(const std::string& environment, Communicator& comm) {
  refuse_split_launch();
  JobSetup job;
  std::vector<std::string> local_notes;
  RankResources mine = my_resources(comm, local_notes);
  for (const auto& text : comm.allgather(encode_resources(mine, cpu_threads()))) {
    int threads = 0;
    job.ranks.push_back(decode_resources(text, threads));
    job.threads.push_back(threads);
  }
  // Layout warnings of any rank reach rank 0's notes.
  std::string joined;
  for (const auto& n : local_notes) joined += n + "\n";
  for (const auto& text : comm.allgather(joined)) {
    std::stringstream in(text);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) job.notes.push_back(line);
  }
  // A CUDA build trains on the GPUs it finds; a build without CUDA reports them and never uses them.
  job.plan = resolve_execution(environment, job.ranks, query_gpus().compiled);
  if (!job.plan.note.empty()) job.notes.insert(job.notes.begin(), job.plan.note);
  if (job.plan.self_launch_ranks > 0)
    fail("execution-environment=multi-gpu: start the job with dlscale launch -n " +
         std::to_string(job.plan.self_launch_ranks) + " -- train ... (one rank per local GPU)");
  for (std::size_t r = 0; r < job.ranks.size(); ++r) {
    const ExecutionPlan& p = job.plan.ranks[r];
    job.devices.push_back(p.computes ? p.device + " (" + std::to_string(job.threads[r]) + " threads)" : "idle");
  }
  job.table = format_rank_table(job.ranks, job.plan, job.threads);
  return job;
}

}  // namespace dlscale
