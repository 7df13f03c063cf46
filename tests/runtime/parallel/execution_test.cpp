// Every row of DESIGN.md's execution-environment table on fake resource
// vectors (one host or several, srun --gpus-per-task isolation, shared GPUs,
// mixed nodes, a build without GPU kernels), the common Slurm GPU layouts as
// each task sees them (CUDA_VISIBLE_DEVICES and bus ids), and the text of
// every error.
#include "runtime/parallel/execution.h"

#include <gtest/gtest.h>

#include "expect_error.h"

#include <string>
#include <vector>

#include "runtime/core/error.h"
#include "runtime/parallel/job_setup.h"

namespace dlscale {
namespace {

using testing::expect_error;

// `count` ranks on `name`, each seeing all `gpus` devices of the node.
std::vector<RankResources> host(const std::string& name, int count, int gpus) {
  std::vector<RankResources> ranks;
  for (int i = 0; i < count; ++i) ranks.push_back({name, i, gpus, "", {}, gpus ? "" : "no CUDA driver"});
  return ranks;
}

std::vector<RankResources> join(std::vector<RankResources> a, const std::vector<RankResources>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<std::string> devices(const JobPlan& plan) {
  std::vector<std::string> out;
  for (const auto& r : plan.ranks) out.push_back(r.computes ? r.device : "idle");
  return out;
}

using Devices = std::vector<std::string>;

TEST(Execution, UnknownValueListsTheValidOnes) {
  expect_error([] { resolve_execution("gpus", host("h", 1, 0), true); },
               "unknown execution-environment 'gpus' (expected one of auto, cpu, gpu, multi-gpu, parallel-auto, "
               "parallel-cpu, parallel-gpu)");
}

TEST(Execution, OneRankWithoutGpu) {
  auto r = host("h", 1, 0);
  JobPlan a = resolve_execution("auto", r, true);
  EXPECT_EQ(a.ranks[0].environment, "auto");
  EXPECT_EQ(devices(a), Devices{"cpu"});
  EXPECT_EQ(a.note, "training on the CPU: no usable GPU (no CUDA driver)");
  EXPECT_FALSE(a.all_gpu());
  EXPECT_EQ(a.computing_ranks(), 1);
  EXPECT_EQ(devices(resolve_execution("cpu", r, true)), Devices{"cpu"});
  EXPECT_EQ(resolve_execution("cpu", r, true).note, "");
  EXPECT_EQ(devices(resolve_execution("parallel-auto", r, true)), Devices{"cpu"});
  EXPECT_EQ(devices(resolve_execution("parallel-cpu", r, true)), Devices{"cpu"});
  expect_error(
      [&] { resolve_execution("gpu", r, true); },
      "execution-environment=gpu needs a usable GPU, but rank 0 on host h sees no usable GPU (no CUDA driver)");
  expect_error([&] { resolve_execution("parallel-gpu", r, true); },
               "execution-environment=parallel-gpu needs GPUs, but no rank has one (rank 0 on host h sees no usable "
               "GPU (no CUDA driver))");
  expect_error([&] { resolve_execution("multi-gpu", r, true); },
               "execution-environment=multi-gpu needs GPUs on this machine, but rank 0 on host h sees no usable GPU");
}

TEST(Execution, OneRankWithOneGpu) {
  auto r = host("h", 1, 1);
  JobPlan a = resolve_execution("auto", r, true);
  EXPECT_EQ(devices(a), Devices{"gpu:0"});
  EXPECT_EQ(a.ranks[0].gpu_index, 0);
  EXPECT_TRUE(a.all_gpu());
  EXPECT_EQ(a.note, "");
  EXPECT_EQ(devices(resolve_execution("gpu", r, true)), Devices{"gpu:0"});
  EXPECT_EQ(devices(resolve_execution("cpu", r, true)), Devices{"cpu"});
  JobPlan p = resolve_execution("parallel-auto", r, true);
  EXPECT_EQ(p.ranks[0].environment, "parallel-auto");
  EXPECT_EQ(devices(p), Devices{"gpu:0"});
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), Devices{"gpu:0"});
  JobPlan m = resolve_execution("multi-gpu", r, true);
  EXPECT_EQ(devices(m), Devices{"gpu:0"});
  EXPECT_EQ(m.self_launch_ranks, 0);
  EXPECT_EQ(m.note, "multi-gpu: host h has one GPU, so this process trains on gpu:0 alone");
}

// Today's build: GPUs are seen and reported, never used.
TEST(Execution, WithoutGpuKernelsGpusAreReportedNotUsed) {
  auto r = host("h", 1, 2);
  JobPlan a = resolve_execution("auto", r, false);
  EXPECT_EQ(devices(a), Devices{"cpu"});
  EXPECT_EQ(a.note, "training on the CPU: 2 GPU(s) found, but this dlscale was built without CUDA, so it has no GPU training");
  expect_error([&] { resolve_execution("gpu", r, false); },
               "execution-environment=gpu: this dlscale was built without CUDA, so it has no GPU training; use cpu or auto");
  expect_error([&] { resolve_execution("multi-gpu", r, false); },
               "execution-environment=multi-gpu: this dlscale was built without CUDA, so it has no GPU training; use auto, "
               "or parallel-cpu under mpirun or srun");
  auto four = host("h", 4, 4);
  JobPlan p = resolve_execution("parallel-auto", four, false);
  EXPECT_EQ(devices(p), (Devices{"cpu", "cpu", "cpu", "cpu"}));
  EXPECT_FALSE(p.all_gpu());
  EXPECT_EQ(p.note,
            "training on the CPU: 4 of 4 ranks see a GPU, but this dlscale was built without CUDA, so it has no GPU training");
  expect_error([&] { resolve_execution("parallel-gpu", four, false); },
               "execution-environment=parallel-gpu: this dlscale was built without CUDA, so it has no GPU training; use "
               "parallel-cpu or parallel-auto");
  expect_error([&] { resolve_execution("multi-gpu", four, false); }, "built without CUDA");
  // Without kernels nothing binds, so ranks that would share a GPU are fine.
  std::vector<RankResources> shared = {{"h", 0, 1, "0"}, {"h", 1, 1, "0"}};
  EXPECT_EQ(devices(resolve_execution("parallel-auto", shared, false)), (Devices{"cpu", "cpu"}));
}

TEST(Execution, FourRanksOnOneHostWithFourGpus) {
  auto r = host("h", 4, 4);
  const Devices gpus{"gpu:0", "gpu:1", "gpu:2", "gpu:3"};
  JobPlan a = resolve_execution("auto", r, true);
  EXPECT_EQ(a.ranks[0].environment, "parallel-auto");
  EXPECT_EQ(devices(a), gpus);
  EXPECT_TRUE(a.all_gpu());
  EXPECT_EQ(a.computing_ranks(), 4);
  EXPECT_EQ(a.note, "");
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), gpus);
  JobPlan m = resolve_execution("multi-gpu", r, true);
  EXPECT_EQ(devices(m), gpus);
  EXPECT_EQ(m.ranks[3].environment, "multi-gpu");
  EXPECT_EQ(m.self_launch_ranks, 0);
  JobPlan c = resolve_execution("parallel-cpu", r, true);
  EXPECT_EQ(devices(c), (Devices{"cpu", "cpu", "cpu", "cpu"}));
  EXPECT_FALSE(c.all_gpu());
  EXPECT_EQ(c.note, "");
  expect_error([&] { resolve_execution("cpu", r, true); },
               "execution-environment=cpu runs one process, but this job has 4 ranks; use parallel-cpu");
  expect_error([&] { resolve_execution("gpu", r, true); },
               "execution-environment=gpu runs one process, but this job has 4 ranks; use parallel-gpu");
}

TEST(Execution, TwoHostsWithFourRanksAndFourGpusEach) {
  auto r = join(host("a", 4, 4), host("b", 4, 4));
  const Devices gpus{"gpu:0", "gpu:1", "gpu:2", "gpu:3", "gpu:0", "gpu:1", "gpu:2", "gpu:3"};
  EXPECT_EQ(devices(resolve_execution("parallel-auto", r, true)), gpus);
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), gpus);
  EXPECT_TRUE(resolve_execution("auto", r, true).all_gpu());
  expect_error([&] { resolve_execution("multi-gpu", r, true); },
               "execution-environment=multi-gpu runs on one machine, but this job's 8 ranks are on 2 hosts (a, b); "
               "use parallel-gpu");
}

TEST(Execution, ExtraRanksIdleUnderParallelAuto) {
  auto r = host("h", 8, 4);
  JobPlan a = resolve_execution("parallel-auto", r, true);
  EXPECT_EQ(devices(a), (Devices{"gpu:0", "gpu:1", "gpu:2", "gpu:3", "idle", "idle", "idle", "idle"}));
  EXPECT_EQ(a.computing_ranks(), 4);
  EXPECT_TRUE(a.all_gpu());  // idle ranks do not take part in the gradient all-reduce
  EXPECT_EQ(a.note, "parallel-auto: 4 rank(s) train on GPUs; ranks 4-7 (host h) have no GPU of their own and idle");
  expect_error([&] { resolve_execution("parallel-gpu", r, true); },
               "execution-environment=parallel-gpu needs a GPU for every rank, but rank 4 on host h is local rank 4 "
               "but sees only 4 GPU(s); start at most one rank per GPU on each host, or use parallel-auto");
}

// A node with one GPU and no CUDA_VISIBLE_DEVICES: the GPU is local rank 0's;
// the second rank idles rather than sharing it.
TEST(Execution, SecondRankOnAOneGpuNodeIdles) {
  auto r = host("h", 2, 1);
  JobPlan a = resolve_execution("parallel-auto", r, true);
  EXPECT_EQ(devices(a), (Devices{"gpu:0", "idle"}));
  EXPECT_EQ(a.note, "parallel-auto: 1 rank(s) train on GPUs; rank 1 (host h) has no GPU of its own and idles");
}

// srun --gpus-per-task=1: each task sees one device, renumbered 0.
TEST(Execution, SrunGpusPerTaskBindsEveryRankToItsDeviceZero) {
  std::vector<RankResources> r;
  for (const char* host_name : {"a", "b"})
    for (int i = 0; i < 4; ++i) r.push_back({host_name, i, 1, std::to_string(i)});
  const Devices zero(8, "gpu:0");
  EXPECT_EQ(devices(resolve_execution("parallel-auto", r, true)), zero);
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), zero);
  EXPECT_TRUE(resolve_execution("auto", r, true).all_gpu());
}

TEST(Execution, TwoRanksOnOneGpuAreRefused) {
  std::vector<RankResources> r = {{"h", 0, 1, "0"}, {"h", 1, 1, "0"}};
  const std::string message =
      "ranks 0 and 1 on host h would share GPU 0 (rank 1 is local rank 1, sees 1 device(s), CUDA_VISIBLE_DEVICES 0); "
      "give each rank its own GPU";
  expect_error([&] { resolve_execution("parallel-auto", r, true); }, message);
  expect_error([&] { resolve_execution("parallel-gpu", r, true); }, message);
  expect_error([&] { resolve_execution("multi-gpu", r, true); }, message);
  // The same CUDA_VISIBLE_DEVICES entry on two hosts is two GPUs.
  std::vector<RankResources> apart = {{"a", 0, 1, "0"}, {"b", 0, 1, "0"}};
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", apart, true)), (Devices{"gpu:0", "gpu:0"}));
  // Physical entries, not indices: "2,3" and "3" put ranks 1 and 2 on GPU 3.
  std::vector<RankResources> overlap = {{"h", 0, 2, "2,3"}, {"h", 1, 2, "2,3"}, {"h", 2, 1, "3"}};
  expect_error([&] { resolve_execution("parallel-gpu", overlap, true); }, "ranks 1 and 2 on host h would share GPU 3");
  // Bus ids, when known, beat CUDA_VISIBLE_DEVICES (cgroup isolation shows "0" to every task).
  std::vector<RankResources> cgroup = {{"h", 0, 1, "0", {"0000:17:00.0"}}, {"h", 1, 1, "0", {"0000:65:00.0"}}};
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", cgroup, true)), (Devices{"gpu:0", "gpu:0"}));
  cgroup[1].device_ids = {"0000:17:00.0"};
  expect_error([&] { resolve_execution("parallel-gpu", cgroup, true); },
               "ranks 0 and 1 on host h would share the GPU at PCI bus id 0000:17:00.0");
}

// Recorded views of one 4-GPU node (two sockets, GPUs 0,1 on the first): what
// each task of the common Slurm layouts sees, as CUDA_VISIBLE_DEVICES and as
// the bus ids CUDA reports for its visible devices (GpuInfo::bus_ids).
const std::vector<std::string> kBus = {"0000:17:00.0", "0000:65:00.0", "0000:CA:00.0", "0000:E3:00.0"};

RankResources task(const std::string& name, int local_rank, const std::string& visible, std::vector<int> physical) {
  RankResources r{name, local_rank, static_cast<int>(physical.size()), visible};
  for (int p : physical) r.device_ids.push_back(kBus[p]);
  return r;
}

// srun --gpus-per-task=1 on nodes that constrain devices by cgroup: every
// task sees its own GPU as CUDA_VISIBLE_DEVICES=0; only the bus ids differ.
TEST(ExecutionLayouts, GpusPerTaskUnderCgroupIsolation) {
  std::vector<RankResources> r;
  for (const char* name : {"a", "b"})
    for (int i = 0; i < 4; ++i) r.push_back(task(name, i, "0", {i}));
  const Devices zero(8, "gpu:0");
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), zero);
  EXPECT_EQ(devices(resolve_execution("multi-gpu", std::vector<RankResources>(r.begin(), r.begin() + 4), true)),
            Devices(4, "gpu:0"));
  JobPlan a = resolve_execution("auto", r, true);
  EXPECT_EQ(devices(a), zero);
  EXPECT_TRUE(a.all_gpu());
  EXPECT_EQ(a.note, "");
}

// srun --gpus-per-task=1 --gpu-bind=per_task:1 without cgroup isolation:
// task i sees GPU i (the generated scripts' default).
TEST(ExecutionLayouts, GpusPerTaskBoundPerTask) {
  std::vector<RankResources> r;
  for (int i = 0; i < 4; ++i) r.push_back(task("a", i, std::to_string(i), {i}));
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), Devices(4, "gpu:0"));
}

// --gres=gpu:4 (or gpus-per-node) with --gpu-bind=none: every task sees all
// four GPUs and takes the one at its local rank; a fifth task has none.
TEST(ExecutionLayouts, GresWithoutBindingBindsByLocalRank) {
  std::vector<RankResources> r;
  for (int i = 0; i < 4; ++i) r.push_back(task("a", i, "0,1,2,3", {0, 1, 2, 3}));
  const Devices gpus{"gpu:0", "gpu:1", "gpu:2", "gpu:3"};
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), gpus);
  EXPECT_EQ(devices(resolve_execution("auto", r, true)), gpus);
  r.push_back(task("a", 4, "0,1,2,3", {0, 1, 2, 3}));
  EXPECT_EQ(devices(resolve_execution("parallel-auto", r, true)),
            (Devices{"gpu:0", "gpu:1", "gpu:2", "gpu:3", "idle"}));
  expect_error([&] { resolve_execution("parallel-gpu", r, true); },
               "rank 4 on host a is local rank 4 but sees only 4 GPU(s)");
}

// srun --gpu-bind=closest: each task sees the GPUs of its socket, so tasks
// 2 and 3 (second socket) see "2,3" and take its first and second GPU.
TEST(ExecutionLayouts, GpuBindClosestBindsByPlaceAmongTheSocketsTasks) {
  std::vector<RankResources> r = {task("a", 0, "0,1", {0, 1}), task("a", 1, "0,1", {0, 1}),
                                  task("a", 2, "2,3", {2, 3}), task("a", 3, "2,3", {2, 3})};
  const Devices gpus{"gpu:0", "gpu:1", "gpu:0", "gpu:1"};
  EXPECT_EQ(devices(resolve_execution("parallel-gpu", r, true)), gpus);
  JobPlan a = resolve_execution("parallel-auto", r, true);
  EXPECT_EQ(devices(a), gpus);
  EXPECT_EQ(a.note, "");
  EXPECT_EQ(format_rank_table(r, a, {}),
            "   rank  host  local  device   bus id        CUDA_VISIBLE_DEVICES\n"
            "      0  a         0  gpu:0    0000:17:00.0  0,1\n"
            "      1  a         1  gpu:1    0000:65:00.0  0,1\n"
            "      2  a         2  gpu:0    0000:CA:00.0  2,3\n"
            "      3  a         3  gpu:1    0000:E3:00.0  2,3");
  // Six tasks, two on the first socket and four on the second: two of the
  // second socket's have no GPU of their own.
  std::vector<RankResources> six;
  for (int i = 0; i < 6; ++i) six.push_back(i < 2 ? task("a", i, "0,1", {0, 1}) : task("a", i, "2,3", {2, 3}));
  JobPlan p = resolve_execution("parallel-auto", six, true);
  EXPECT_EQ(devices(p), (Devices{"gpu:0", "gpu:1", "gpu:0", "gpu:1", "idle", "idle"}));
  EXPECT_EQ(p.note, "parallel-auto: 4 rank(s) train on GPUs; ranks 4-5 (host a) have no GPU of their own and idle");
  expect_error([&] { resolve_execution("parallel-gpu", six, true); },
               "rank 4 on host a comes after 2 rank(s) of its host that see the same 2 GPU(s) (CUDA_VISIBLE_DEVICES "
               "2,3); start at most one rank per GPU");
}

// CUDA_VISIBLE_DEVICES set by hand so that two ranks drive one GPU: refused,
// naming both ranks, the host and the bus id.
TEST(ExecutionLayouts, HandSetVisibleDevicesSharingABusIdAreRefused) {
  std::vector<RankResources> r = {task("a", 0, "1", {1}), task("a", 1, "1", {1})};
  const std::string message =
      "ranks 0 and 1 on host a would share the GPU at PCI bus id 0000:65:00.0 (rank 1 is local rank 1, sees 1 "
      "device(s), CUDA_VISIBLE_DEVICES 1); give each rank its own GPU";
  expect_error([&] { resolve_execution("parallel-auto", r, true); }, message);
  expect_error([&] { resolve_execution("parallel-gpu", r, true); }, message);
  // Other entries, one GPU: rank 0 sees GPUs 1 and 0 and takes its first, GPU 1 again.
  r = {task("a", 0, "1,0", {1, 0}), task("a", 1, "1", {1})};
  expect_error([&] { resolve_execution("parallel-gpu", r, true); },
               "ranks 0 and 1 on host a would share the GPU at PCI bus id 0000:65:00.0");
  // One GPU, no CUDA_VISIBLE_DEVICES: the second rank idles rather than shares.
  r = {task("a", 0, "", {0}), task("a", 1, "", {0})};
  EXPECT_EQ(devices(resolve_execution("parallel-auto", r, true)), (Devices{"gpu:0", "idle"}));
}

TEST(Execution, MixedNodesOnlyGpuRanksCompute) {
  auto r = join(host("gpunode", 4, 4), host("cpunode", 4, 0));
  JobPlan a = resolve_execution("auto", r, true);
  EXPECT_EQ(devices(a), (Devices{"gpu:0", "gpu:1", "gpu:2", "gpu:3", "idle", "idle", "idle", "idle"}));
  EXPECT_TRUE(a.all_gpu());
  EXPECT_EQ(a.note,
            "parallel-auto: 4 rank(s) train on GPUs; ranks 4-7 (host cpunode) have no GPU of their own and idle");
  expect_error([&] { resolve_execution("parallel-gpu", r, true); },
               "execution-environment=parallel-gpu needs a GPU for every rank, but rank 4 on host cpunode sees no "
               "usable GPU (no CUDA driver)");
  JobPlan c = resolve_execution("parallel-cpu", r, true);
  EXPECT_EQ(c.computing_ranks(), 8);
  EXPECT_FALSE(c.all_gpu());
}

TEST(Execution, NoGpuAnywhereTrainsOnTheCpu) {
  auto r = join(host("a", 2, 0), host("b", 2, 0));
  JobPlan a = resolve_execution("parallel-auto", r, true);
  EXPECT_EQ(devices(a), (Devices{"cpu", "cpu", "cpu", "cpu"}));
  EXPECT_EQ(a.note, "training on the CPU: no rank has a GPU of its own (no CUDA driver)");
  expect_error([&] { resolve_execution("parallel-gpu", r, true); },
               "execution-environment=parallel-gpu needs GPUs, but no rank has one (rank 0 on host a");
}

TEST(Execution, MultiGpuFromOneProcessStartsOneRankPerGpu) {
  JobPlan m = resolve_execution("multi-gpu", host("ws", 1, 4), true);
  EXPECT_EQ(devices(m), Devices{"gpu:0"});
  EXPECT_EQ(m.ranks[0].environment, "multi-gpu");
  EXPECT_EQ(m.self_launch_ranks, 4);
  EXPECT_EQ(m.note, "multi-gpu: dlscale will start one rank per local GPU (4 ranks on host ws)");
  // The ranks it starts then resolve as a one-host job.
  EXPECT_EQ(devices(resolve_execution("multi-gpu", host("ws", 4, 4), true)),
            (Devices{"gpu:0", "gpu:1", "gpu:2", "gpu:3"}));
  expect_error([] { resolve_execution("multi-gpu", host("ws", 6, 4), true); },
               "execution-environment=multi-gpu needs a GPU for every rank, but rank 4 on host ws is local rank 4");
}

TEST(Execution, AllGpuNeedsAComputingRankAndNoCpuRank) {
  JobPlan empty;
  EXPECT_FALSE(empty.all_gpu());
  JobPlan mixed;
  mixed.ranks = {{"parallel-auto", "gpu:0", 0, true}, {"parallel-auto", "cpu", -1, true}};
  EXPECT_FALSE(mixed.all_gpu());
  EXPECT_EQ(mixed.computing_ranks(), 2);
  expect_error([] { resolve_execution("auto", {}, true); }, "at least one rank");
}

TEST(Execution, RankTable) {
  auto r = join(host("gpunode", 2, 2), host("cpunode", 1, 0));
  r[0].visible_devices = r[1].visible_devices = "0,1";
  JobPlan plan = resolve_execution("parallel-auto", r, true);
  const std::string table = format_rank_table(r, plan, {8, 8, 16});
  EXPECT_EQ(table,
            "   rank  host     local  device   threads  CUDA_VISIBLE_DEVICES\n"
            "      0  gpunode      0  gpu:0          8  0,1\n"
            "      1  gpunode      1  gpu:1          8  0,1\n"
            "      2  cpunode      0  idle          16  (unset)");
  const std::string short_table = format_rank_table(r, plan, {});
  EXPECT_EQ(short_table.find("threads"), std::string::npos);
  EXPECT_NE(short_table.find("      2  cpunode      0  idle     (unset)"), std::string::npos) << short_table;
  expect_error([&] { format_rank_table(r, plan, {8}); }, "threads_per_rank");
  expect_error([&] { format_rank_table(host("h", 1, 0), plan, {}); }, "differ in ranks");
  // Bus ids where known; "-" for a rank without one.
  r[0].device_ids = r[1].device_ids = {"0000:17:00.0", "0000:65:00.0"};
  EXPECT_EQ(format_rank_table(r, resolve_execution("parallel-auto", r, true), {8, 8, 16}),
            "   rank  host     local  device   bus id        threads  CUDA_VISIBLE_DEVICES\n"
            "      0  gpunode      0  gpu:0    0000:17:00.0        8  0,1\n"
            "      1  gpunode      1  gpu:1    0000:65:00.0        8  0,1\n"
            "      2  cpunode      0  idle     -                  16  (unset)");
}

// What setup_job allgathers: the bus ids travel with the rest of the report.
TEST(Execution, ResourcesRoundTripThroughTheAllgatherText) {
  RankResources r{"node-1", 3, 3, "4,5,6", {"0000:17:00.0", "", "0000:E3:00.0"}, ""};
  int threads = 0;
  RankResources back = decode_resources(encode_resources(r, 12), threads);
  EXPECT_EQ(threads, 12);
  EXPECT_EQ(back.host, "node-1");
  EXPECT_EQ(back.local_rank, 3);
  EXPECT_EQ(back.gpu_count, 3);
  EXPECT_EQ(back.visible_devices, "4,5,6");
  EXPECT_EQ(back.device_ids, r.device_ids);
  r.device_ids = {"0000:17:00.0", ""};
  r.gpu_count = 2;
  EXPECT_EQ(decode_resources(encode_resources(r, 1), threads).device_ids, r.device_ids);
  RankResources none{"node-2", 0, 0, "", {}, "no CUDA driver"};
  back = decode_resources(encode_resources(none, 2), threads);
  EXPECT_TRUE(back.device_ids.empty());
  EXPECT_EQ(back.no_gpu_reason, "no CUDA driver");
}


}  // namespace
}  // namespace dlscale
