// Resolution of execution-environment values to a device per rank: bind each
// rank by its place among the ranks of its host that see the same devices,
// refuse two ranks on one physical GPU (by PCI bus id where known), and
// explain (once, in the note) why ranks idle or stay on the CPU.
#include "runtime/parallel/execution.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

#include "runtime/core/error.h"

namespace dlscale {

namespace {
const char* kValues = "auto, cpu, gpu, multi-gpu, parallel-auto, parallel-cpu, parallel-gpu";
const char* kNoKernels = "this dlscale was built without CUDA, so it has no GPU training";

std::string option(const std::string& environment) { return "execution-environment=" + environment; }
std::string at(int rank, const RankResources& r) { return "rank " + std::to_string(rank) + " on host " + r.host; }

// The set of devices a rank sees, as a key: its bus ids when all are known
// (they name physical GPUs), else its CUDA_VISIBLE_DEVICES.
std::string visible_set(const RankResources& r) {
  const bool known = r.gpu_count > 0 && static_cast<int>(r.device_ids.size()) == r.gpu_count &&
                     std::none_of(r.device_ids.begin(), r.device_ids.end(), [](const auto& id) { return id.empty(); });
  if (!known) return "visible:" + r.visible_devices;
  std::string key = "ids:";
  for (const auto& id : r.device_ids) key += id + ",";
  return key;
}

// Each rank's place among the ranks of its host that see the same devices,
// in local-rank order: the local rank itself when every rank sees all of the
// node's GPUs (no binding), the place among one socket's ranks under srun
// --gpu-bind=closest (each socket's ranks see that socket's GPUs).
std::vector<int> places_among_peers(const std::vector<RankResources>& ranks) {
  std::vector<int> order(ranks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ranks[a].local_rank < ranks[b].local_rank; });
  std::map<std::pair<std::string, std::string>, int> taken;
  std::vector<int> place(ranks.size());
  for (int rank : order) place[rank] = taken[{ranks[rank].host, visible_set(ranks[rank])}]++;
  return place;
}

// Which visible device each rank binds to (-1: none), and its place among its
// peers. The device is the one at the rank's place. A rank that sees exactly
// one device through CUDA_VISIBLE_DEVICES was bound to it (srun
// --gpus-per-task renumbers it as device 0; so does a value set by hand), and
// ranks bound to one GPU meet in check_no_shared_gpu. Without
// CUDA_VISIBLE_DEVICES a single device is the node's only GPU, which the first
// rank owns, so later ranks get none (and idle) instead of tripping the
// duplicate check.
struct Binding {
  std::vector<int> place, device;
};

Binding bind_ranks(const std::vector<RankResources>& ranks) {
  Binding b{places_among_peers(ranks), std::vector<int>(ranks.size(), -1)};
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    const RankResources& r = ranks[rank];
    if (r.gpu_count > b.place[rank]) b.device[rank] = b.place[rank];
    else if (r.gpu_count == 1 && !r.visible_devices.empty()) b.device[rank] = 0;
  }
  return b;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) parts.push_back(part);
  return parts;
}

std::string bus_id(const RankResources& r, int index) {
  return index >= 0 && index < static_cast<int>(r.device_ids.size()) ? r.device_ids[index] : "";
}

// What names the physical GPU behind visible device `index` on its host: its
// bus id when known (CUDA_VISIBLE_DEVICES=0 on every cgroup-isolated task says
// nothing), else the CUDA_VISIBLE_DEVICES entry, else the index.
std::string physical_gpu(const RankResources& r, int index) {
  if (auto id = bus_id(r, index); !id.empty()) return "the GPU at PCI bus id " + id;
  if (!r.visible_devices.empty()) {
    auto entries = split_commas(r.visible_devices);
    if (index < static_cast<int>(entries.size())) return "GPU " + entries[index];
  }
  return "GPU " + std::to_string(index);
}

// "0-3, 6" for the note: jobs have thousands of ranks, the note stays one line.
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out.append("-").append(std::to_string(ranks[j]));
    i = j + 1;
  }
  return out;
}

std::string why_no_gpu(const RankResources& r, int place) {
  if (r.gpu_count <= 0) return "sees no usable GPU" + (r.no_gpu_reason.empty() ? "" : " (" + r.no_gpu_reason + ")");
  const std::string gpus = std::to_string(r.gpu_count) + " GPU(s)";
  if (place == r.local_rank) return "is local rank " + std::to_string(r.local_rank) + " but sees only " + gpus;
  return "comes after " + std::to_string(place) + " rank(s) of its host that see the same " + gpus +
         " (CUDA_VISIBLE_DEVICES " + (r.visible_devices.empty() ? "unset" : r.visible_devices) + ")";
}

[[noreturn]] void no_kernels(const std::string& environment, const std::string& instead) {
  fail(option(environment) + ": " + kNoKernels + "; use " + instead);
}

// Two ranks driving one GPU is NCCL's "duplicate GPU detected" or a silent
// halving of speed; refuse it before any device is touched.
void check_no_shared_gpu(const std::vector<RankResources>& ranks, const std::vector<int>& bound) {
  std::map<std::pair<std::string, std::string>, int> owner;
  for (int rank = 0; rank < static_cast<int>(ranks.size()); ++rank) {
    if (bound[rank] < 0) continue;
    const RankResources& r = ranks[rank];
    auto [it, fresh] = owner.try_emplace({r.host, physical_gpu(r, bound[rank])}, rank);
    if (fresh) continue;
    const int first = it->second;
    const std::string seen = "rank " + std::to_string(rank) + " is local rank " + std::to_string(r.local_rank) +
                             ", sees " + std::to_string(r.gpu_count) + " device(s), CUDA_VISIBLE_DEVICES " +
                             (r.visible_devices.empty() ? "unset" : r.visible_devices);
    fail("ranks " + std::to_string(first) + " and " + std::to_string(rank) + " on host " + r.host +
         " would share " + it->first.second + " (" + seen +
         "); give each rank its own GPU (at most one rank per GPU on each host, or srun --gpus-per-task=1) "
         "or use parallel-cpu");
  }
}

ExecutionPlan cpu_plan(const std::string& environment) { return {environment, "cpu", -1, true}; }
ExecutionPlan gpu_plan(const std::string& environment, int index) {
  return {environment, "gpu:" + std::to_string(index), index, true};
}

JobPlan all_cpu(const std::string& environment, size_t n, std::string note) {
  JobPlan job;
  job.ranks.assign(n, cpu_plan(environment));
  job.note = std::move(note);
  return job;
}

// Why every rank trains on the CPU although GPU training was allowed.
std::string cpu_note(const std::vector<RankResources>& ranks, bool gpu_kernels) {
  int seeing = 0;
  for (const auto& r : ranks) seeing += r.gpu_count > 0;
  if (seeing > 0 && !gpu_kernels) {
    if (ranks.size() == 1)
      return "training on the CPU: " + std::to_string(ranks[0].gpu_count) + " GPU(s) found, but " + kNoKernels;
    return "training on the CPU: " + std::to_string(seeing) + " of " + std::to_string(ranks.size()) +
           " ranks see a GPU, but " + kNoKernels;
  }
  std::string why = ranks[0].no_gpu_reason.empty() ? "" : " (" + ranks[0].no_gpu_reason + ")";
  if (ranks.size() == 1) return "training on the CPU: no usable GPU" + why;
  return "training on the CPU: no rank has a GPU of its own" + why;
}

// cpu, gpu and auto with one rank.
JobPlan single_process(const std::string& environment, const RankResources& r, bool gpu_kernels) {
  if (environment == "cpu") return all_cpu("cpu", 1, "");
  const int index = bind_ranks({r}).device[0];
  if (environment == "gpu") {
    if (!gpu_kernels) no_kernels("gpu", "cpu or auto");
    if (index < 0) fail(option("gpu") + " needs a usable GPU, but " + at(0, r) + " " + why_no_gpu(r, 0));
    return JobPlan{{gpu_plan("gpu", index)}, "", 0};
  }
  if (gpu_kernels && index >= 0) return JobPlan{{gpu_plan("auto", index)}, "", 0};
  return all_cpu("auto", 1, cpu_note({r}, gpu_kernels));
}

// multi-gpu from one process: it becomes rank 0 on gpu:0; dlscale starts the
// other ranks itself (one per local GPU).
JobPlan multi_gpu_launcher(const RankResources& r, bool gpu_kernels) {
  if (!gpu_kernels) no_kernels("multi-gpu", "auto, or parallel-cpu under mpirun or srun");
  if (r.gpu_count <= 0)
    fail(option("multi-gpu") + " needs GPUs on this machine, but " + at(0, r) + " " + why_no_gpu(r, 0));
  JobPlan job{{gpu_plan("multi-gpu", 0)}, "", 0};
  if (r.gpu_count > 1) {
    job.self_launch_ranks = r.gpu_count;
    job.note = "multi-gpu: dlscale will start one rank per local GPU (" + std::to_string(r.gpu_count) +
               " ranks on host " + r.host + ")";
  } else {
    job.note = "multi-gpu: host " + r.host + " has one GPU, so this process trains on gpu:0 alone";
  }
  return job;
}

void require_one_host(const std::vector<RankResources>& ranks) {
  std::set<std::string> hosts;
  for (const auto& r : ranks) hosts.insert(r.host);
  if (hosts.size() <= 1) return;
  std::string names;
  for (const auto& h : hosts) names += (names.empty() ? "" : ", ") + h;
  fail(option("multi-gpu") + " runs on one machine, but this job's " + std::to_string(ranks.size()) + " ranks are on " +
       std::to_string(hosts.size()) + " hosts (" + names + "); use parallel-gpu");
}

// parallel-gpu, and multi-gpu inside an existing job: every rank on its own GPU.
JobPlan every_rank_on_gpu(const std::string& environment, const std::vector<RankResources>& ranks, bool gpu_kernels) {
  if (!gpu_kernels) no_kernels(environment, "parallel-cpu or parallel-auto");
  const Binding binding = bind_ranks(ranks);
  const std::vector<int>& bound = binding.device;
  if (std::none_of(bound.begin(), bound.end(), [](int b) { return b >= 0; }))
    fail(option(environment) + " needs GPUs, but no rank has one (" + at(0, ranks[0]) + " " +
         why_no_gpu(ranks[0], binding.place[0]) + ")");
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    if (bound[rank] >= 0) continue;
    fail(option(environment) + " needs a GPU for every rank, but " + at(static_cast<int>(rank), ranks[rank]) + " " +
         why_no_gpu(ranks[rank], binding.place[rank]) +
         "; start at most one rank per GPU on each host, or use parallel-auto to let "
         "ranks without a GPU idle");
  }
  check_no_shared_gpu(ranks, bound);
  JobPlan job;
  for (int b : bound) job.ranks.push_back(gpu_plan(environment, b));
  return job;
}

// Only GPU ranks compute when any rank has a GPU: a CPU rank in a synchronous
// GPU all-reduce would make every step wait for it.
JobPlan parallel_auto(const std::vector<RankResources>& ranks, bool gpu_kernels) {
  std::vector<int> bound(ranks.size(), -1);
  if (gpu_kernels) bound = bind_ranks(ranks).device;
  if (std::none_of(bound.begin(), bound.end(), [](int b) { return b >= 0; }))
    return all_cpu("parallel-auto", ranks.size(), cpu_note(ranks, gpu_kernels));
  check_no_shared_gpu(ranks, bound);
  JobPlan job;
  std::vector<int> idle;
  std::set<std::string> idle_hosts;
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    if (bound[rank] >= 0) {
      job.ranks.push_back(gpu_plan("parallel-auto", bound[rank]));
      continue;
    }
    ExecutionPlan p = cpu_plan("parallel-auto");
    p.computes = false;
    job.ranks.push_back(p);
    idle.push_back(static_cast<int>(rank));
    idle_hosts.insert(ranks[rank].host);
  }
  if (!idle.empty()) {
    std::string hosts;
    for (const auto& h : idle_hosts) hosts += (hosts.empty() ? "" : ", ") + h;
    const bool one = idle.size() == 1;
    job.note = "parallel-auto: " + std::to_string(job.computing_ranks()) + " rank(s) train on GPUs; " +
               (one ? "rank " : "ranks ") + rank_list(idle) + " (host " + hosts + ") " +
               (one ? "has no GPU of its own and idles" : "have no GPU of their own and idle");
  }
  return job;
}
}  // namespace

bool JobPlan::all_gpu() const {
  bool any = false;
  for (const auto& r : ranks) {
    if (!r.computes) continue;
    if (r.gpu_index < 0) return false;
    any = true;
  }
  return any;
}

int JobPlan::computing_ranks() const {
  return static_cast<int>(std::count_if(ranks.begin(), ranks.end(), [](const auto& r) { return r.computes; }));
}

JobPlan resolve_execution(const std::string& environment, const std::vector<RankResources>& ranks, bool gpu_kernels) {
  static const std::set<std::string> valid = {"auto",          "cpu",          "gpu",         "multi-gpu",
                                              "parallel-auto", "parallel-cpu", "parallel-gpu"};
  if (!valid.count(environment))
    fail("unknown execution-environment '" + environment + "' (expected one of " + kValues + ")");
  DLSCALE_REQUIRE(!ranks.empty(), "resolve_execution needs the resources of at least one rank");
  const size_t n = ranks.size();
  if ((environment == "cpu" || environment == "gpu") && n > 1)
    fail(option(environment) + " runs one process, but this job has " + std::to_string(n) + " ranks; use parallel-" +
         environment);
  if (environment == "cpu" || environment == "gpu" || (environment == "auto" && n == 1))
    return single_process(environment, ranks[0], gpu_kernels);
  if (environment == "multi-gpu" && n == 1) return multi_gpu_launcher(ranks[0], gpu_kernels);
  if (environment == "parallel-cpu") return all_cpu("parallel-cpu", n, "");
  if (environment == "auto" || environment == "parallel-auto") return parallel_auto(ranks, gpu_kernels);
  if (environment == "multi-gpu") require_one_host(ranks);
  return every_rank_on_gpu(environment, ranks, gpu_kernels);
}

std::string format_rank_table(const std::vector<RankResources>& ranks, const JobPlan& plan,
                              const std::vector<int>& threads_per_rank) {
  DLSCALE_REQUIRE(plan.ranks.size() == ranks.size(), "format_rank_table: the plan and the resources differ in ranks");
  DLSCALE_REQUIRE(threads_per_rank.empty() || threads_per_rank.size() == ranks.size(),
                  "format_rank_table: threads_per_rank must be empty or have one entry per rank");
  // The bus id of each rank's GPU: what tells ranks apart when every task sees CUDA_VISIBLE_DEVICES=0.
  std::vector<std::string> bus(ranks.size());
  size_t host_width = 4, bus_width = 0;
  for (size_t i = 0; i < ranks.size(); ++i) {
    host_width = std::max(host_width, ranks[i].host.size());
    if (plan.ranks[i].computes) bus[i] = bus_id(ranks[i], plan.ranks[i].gpu_index);
    bus_width = std::max(bus_width, bus[i].size());
  }
  const bool threads = !threads_per_rank.empty();
  auto row = [&](const std::string& rank, const std::string& host, const std::string& local, const std::string& device,
                 const std::string& gpu_bus, const std::string& nthreads, const std::string& cvd) {
    char line[512];
    std::snprintf(line, sizeof line, "  %5s  %-*s  %5s  %-7s", rank.c_str(), static_cast<int>(host_width), host.c_str(),
                  local.c_str(), device.c_str());
    std::string out = line;
    if (bus_width > 0) {
      std::snprintf(line, sizeof line, "  %-*s", static_cast<int>(std::max<size_t>(bus_width, 6)), gpu_bus.c_str());
      out += line;
    }
    if (threads) {
      std::snprintf(line, sizeof line, "  %7s", nthreads.c_str());
      out += line;
    }
    return out + "  " + cvd;
  };
  std::string table = row("rank", "host", "local", "device", "bus id", "threads", "CUDA_VISIBLE_DEVICES");
  for (size_t i = 0; i < ranks.size(); ++i) {
    const auto& p = plan.ranks[i];
    table += '\n';
    table += row(std::to_string(i), ranks[i].host, std::to_string(ranks[i].local_rank), p.computes ? p.device : "idle",
                 bus[i].empty() ? "-" : bus[i], threads ? std::to_string(threads_per_rank[i]) : "",
                 ranks[i].visible_devices.empty() ? "(unset)" : ranks[i].visible_devices);
  }
  return table;
}

}  // namespace dlscale
