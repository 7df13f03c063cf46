// detect_layout on environments recorded from each way a dlscale job starts
// (mpirun, srun --mpi=pmix, mpirun inside sbatch, a bare batch shell, uneven
// srun layouts, a singleton), malformed values, check_layout against MPI, and
// split_launch_error (tasks that started as separate MPI jobs).
#include "runtime/parallel/rank_layout.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <string>

#include "expect_error.h"
#include "runtime/core/error.h"

namespace dlscale {
namespace {

using Env = std::map<std::string, std::string>;
using testing::expect_error;

EnvLookup lookup(const Env& env) {
  return [env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

Env merged(Env a, const Env& b) {
  a.insert(b.begin(), b.end());
  return a;
}

void expect_layout(const RankLayout& l, int rank, int size, int local_rank, int local_size, int node_id) {
  EXPECT_EQ(l.rank, rank);
  EXPECT_EQ(l.size, size);
  EXPECT_EQ(l.local_rank, local_rank);
  EXPECT_EQ(l.local_size, local_size);
  EXPECT_EQ(l.node_id, node_id);
}

// Rank 1 of `mpirun -n 2` on one node (Open MPI 4.1.4, recorded here).
const Env kMpirun = {
    {"OMPI_COMM_WORLD_RANK", "1"},       {"OMPI_COMM_WORLD_SIZE", "2"},      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}, {"OMPI_COMM_WORLD_NODE_RANK", "1"}, {"OMPI_UNIVERSE_SIZE", "2"},
    {"OMPI_FIRST_RANKS", "0"},           {"OMPI_MCA_orte_num_nodes", "1"},   {"PMIX_RANK", "1"},
    {"PMIX_NAMESPACE", "494534657"}};

// An sbatch batch shell of `sbatch -N1 -n4` before any srun: SLURM_PROCID and
// SLURM_LOCALID describe the shell, not a rank.
const Env kBatchShell = {{"SLURM_JOB_ID", "42"},       {"SLURM_JOBID", "42"},         {"SLURM_NTASKS", "4"},
                         {"SLURM_NPROCS", "4"},        {"SLURM_TASKS_PER_NODE", "4"}, {"SLURM_NNODES", "1"},
                         {"SLURM_JOB_NUM_NODES", "1"}, {"SLURM_NODEID", "0"},         {"SLURM_PROCID", "0"},
                         {"SLURM_LOCALID", "0"},       {"SLURM_GTIDS", "0"},          {"SLURM_CPUS_ON_NODE", "4"}};

// Task 3 of `srun --mpi=pmix -N2 -n4` (2 per node): no OMPI_COMM_WORLD_*.
const Env kSrunPmix = {{"SLURM_JOB_ID", "42"},
                       {"SLURM_STEP_ID", "0"},
                       {"SLURM_STEPID", "0"},
                       {"SLURM_PROCID", "3"},
                       {"SLURM_LOCALID", "1"},
                       {"SLURM_NODEID", "1"},
                       {"SLURM_NTASKS", "4"},
                       {"SLURM_NPROCS", "4"},
                       {"SLURM_STEP_NUM_TASKS", "4"},
                       {"SLURM_TASKS_PER_NODE", "2(x2)"},
                       {"SLURM_STEP_TASKS_PER_NODE", "2(x2)"},
                       {"SLURM_NNODES", "2"},
                       {"SLURM_GTIDS", "2,3"},
                       {"SLURM_MPI_TYPE", "pmix"},
                       {"PMIX_RANK", "3"},
                       {"PMIX_NAMESPACE", "slurm.pmix.42.0"}};

TEST(RankLayout, MpirunUsesOpenMpiVariables) {
  RankLayout l = detect_layout(lookup(kMpirun));
  EXPECT_EQ(l.launcher, "openmpi");
  // OMPI_COMM_WORLD_NODE_RANK=1 here although both ranks share node 0.
  expect_layout(l, 1, 2, 1, 2, -1);
  EXPECT_EQ(l.rank_from, "OMPI_COMM_WORLD_RANK");
  EXPECT_EQ(l.visible_devices, "");
  EXPECT_EQ(l.hint, "");
}

TEST(RankLayout, SrunWithPmixUsesSlurmVariables) {
  RankLayout l = detect_layout(lookup(kSrunPmix));
  EXPECT_EQ(l.launcher, "slurm");
  expect_layout(l, 3, 4, 1, 2, 1);
  EXPECT_EQ(l.size_from, "SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(l.local_size_from, "SLURM_STEP_TASKS_PER_NODE[1]");
}

// mpirun inside an allocation: the ranks inherit the batch shell's SLURM_*
// (SLURM_PROCID=0 on every rank); Open MPI's variables are the truth.
TEST(RankLayout, MpirunInsideSbatchPrefersOpenMpi) {
  Env env = merged({{"OMPI_COMM_WORLD_RANK", "2"},
                    {"OMPI_COMM_WORLD_SIZE", "4"},
                    {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                    {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                    {"OMPI_COMM_WORLD_NODE_RANK", "2"},
                    {"PMIX_RANK", "2"}},
                   kBatchShell);
  RankLayout l = detect_layout(lookup(env));
  EXPECT_EQ(l.launcher, "openmpi");
  expect_layout(l, 2, 4, 2, 4, -1);
  EXPECT_EQ(l.hint, "");
}

TEST(RankLayout, BatchShellWithoutSrunIsOneProcess) {
  RankLayout l = detect_layout(lookup(kBatchShell));
  EXPECT_EQ(l.launcher, "none");
  expect_layout(l, 0, 1, 0, 1, 0);
  EXPECT_EQ(l.hint,
            "dlscale runs as one process in the batch shell of Slurm job 42, which has SLURM_NTASKS=4 tasks; start it "
            "with srun (or mpirun) to use them");
  // A one-task job needs no hint, and a strange SLURM_NTASKS there is not ours to refuse.
  EXPECT_EQ(detect_layout(lookup(merged({{"SLURM_NTASKS", "1"}}, kBatchShell))).hint, "");
  EXPECT_EQ(detect_layout(lookup(merged({{"SLURM_NTASKS", "many"}}, kBatchShell))).hint, "");
}

// srun -N2 -n4 with 3 tasks on the first node and 1 on the second; only the
// job-wide SLURM_TASKS_PER_NODE (older Slurm has no SLURM_STEP_*).
TEST(RankLayout, UnevenSrunLayoutPicksThisNodesEntry) {
  Env env = {{"SLURM_STEP_ID", "1"}, {"SLURM_PROCID", "3"},           {"SLURM_LOCALID", "0"},
             {"SLURM_NODEID", "1"},  {"SLURM_TASKS_PER_NODE", "3,1"}, {"SLURM_NTASKS", "4"}};
  RankLayout l = detect_layout(lookup(env));
  EXPECT_EQ(l.launcher, "slurm");
  expect_layout(l, 3, 4, 0, 1, 1);
  EXPECT_EQ(l.local_size_from, "SLURM_TASKS_PER_NODE[1]");
  env["SLURM_PROCID"] = "1";
  env["SLURM_LOCALID"] = "1";
  env["SLURM_NODEID"] = "0";
  expect_layout(detect_layout(lookup(env)), 1, 4, 1, 3, 0);
  // Repeats: nodes 0 and 1 run 4 tasks, node 2 runs 3.
  env = {{"SLURM_STEPID", "0"},
         {"SLURM_PROCID", "9"},
         {"SLURM_LOCALID", "1"},
         {"SLURM_NODEID", "2"},
         {"SLURM_TASKS_PER_NODE", "4(x2),3"},
         {"SLURM_NTASKS", "11"}};
  expect_layout(detect_layout(lookup(env)), 9, 11, 1, 3, 2);
  env["SLURM_NODEID"] = "1";
  env["SLURM_PROCID"] = "5";
  expect_layout(detect_layout(lookup(env)), 5, 11, 1, 4, 1);
}

TEST(RankLayout, SingletonWithNothingSet) {
  RankLayout l = detect_layout(lookup({}));
  EXPECT_EQ(l.launcher, "none");
  expect_layout(l, 0, 1, 0, 1, 0);
  EXPECT_EQ(l.visible_devices, "");
  EXPECT_EQ(l.hint, "");
  EXPECT_EQ(detect_layout(lookup({{"CUDA_VISIBLE_DEVICES", "2,3"}})).visible_devices, "2,3");
}

TEST(RankLayout, BarePmixSaysOnlyTheRank) {
  RankLayout l = detect_layout(lookup({{"PMIX_RANK", "2"}, {"PMIX_NAMESPACE", "prterun-x-1@1"}}));
  EXPECT_EQ(l.launcher, "pmix");
  expect_layout(l, 2, -1, -1, -1, -1);
}

TEST(RankLayout, MalformedValuesNameTheVariable) {
  expect_error(
      [] {
        detect_layout(lookup(merged({{"SLURM_PROCID", "abc"}}, kSrunPmix)));
      },
      "launcher variable SLURM_PROCID='abc' is not a whole number");
  expect_error(
      [] {
        detect_layout(lookup(merged({{"OMPI_COMM_WORLD_RANK", "1x"}}, kMpirun)));
      },
      "launcher variable OMPI_COMM_WORLD_RANK='1x' is not a whole number");
  expect_error(
      [] {
        detect_layout(lookup(merged({{"OMPI_COMM_WORLD_LOCAL_RANK", "-1"}}, kMpirun)));
      },
      "OMPI_COMM_WORLD_LOCAL_RANK='-1'");
  expect_error(
      [] {
        detect_layout(lookup(merged({{"OMPI_COMM_WORLD_SIZE", ""}}, kMpirun)));
      },
      "OMPI_COMM_WORLD_SIZE=''");
  expect_error([] { detect_layout(lookup({{"PMIX_RANK", " 2"}})); }, "PMIX_RANK=' 2'");
  for (const char* bad : {"4(x)", "4(2)", "", "4,", "x(x2)", "4(x0)", "4(x2"})
    expect_error(
        [&] {
          detect_layout(lookup(merged({{"SLURM_STEP_TASKS_PER_NODE", bad}}, kSrunPmix)));
        },
        "launcher variable SLURM_STEP_TASKS_PER_NODE='" + std::string(bad) + "' is not of the form 4(x2),3");
  expect_error(
      [] {
        detect_layout(lookup(merged({{"SLURM_STEP_TASKS_PER_NODE", "4"}}, kSrunPmix)));
      },
      "SLURM_STEP_TASKS_PER_NODE='4' lists 1 node(s), but this is node 1");
}

TEST(RankLayout, InconsistentOrMissingValuesAreRefused) {
  expect_error(
      [] {
        detect_layout(lookup(merged({{"OMPI_COMM_WORLD_RANK", "2"}}, kMpirun)));
      },
      "launcher variables disagree: OMPI_COMM_WORLD_RANK=2 is not below OMPI_COMM_WORLD_SIZE=2");
  expect_error(
      [] {
        detect_layout(lookup(merged({{"SLURM_LOCALID", "2"}}, kSrunPmix)));
      },
      "SLURM_LOCALID=2 is not below SLURM_STEP_TASKS_PER_NODE[1]=2");
  expect_error(
      [] {
        detect_layout(lookup(merged({{"SLURM_STEP_NUM_TASKS", "0"}}, kSrunPmix)));
      },
      "SLURM_STEP_NUM_TASKS=0");
  Env no_procid = kSrunPmix;
  no_procid.erase("SLURM_PROCID");
  expect_error([&] { detect_layout(lookup(no_procid)); },
               "srun started this task (SLURM_STEP_ID is set), but SLURM_PROCID is not set");
  expect_error(
      [] {
        detect_layout(lookup({{"OMPI_COMM_WORLD_RANK", "0"}}));
      },
      "OMPI_COMM_WORLD_RANK is set (started by mpirun), but OMPI_COMM_WORLD_SIZE is not set");
}

TEST(RankLayout, ProcessEnvironmentReadsGetenv) {
  ::setenv("DLSCALE_RANK_LAYOUT_TEST", "7", 1);
  EXPECT_EQ(process_environment()("DLSCALE_RANK_LAYOUT_TEST"), std::optional<std::string>("7"));
  ::unsetenv("DLSCALE_RANK_LAYOUT_TEST");
  EXPECT_EQ(process_environment()("DLSCALE_RANK_LAYOUT_TEST"), std::nullopt);
}

TEST(RankLayout, CheckLayoutAgreeing) {
  EXPECT_EQ(check_layout(detect_layout(lookup(kMpirun)), 1, 2, 1, 2), "");
  EXPECT_EQ(check_layout(detect_layout(lookup(kSrunPmix)), 3, 4, 1, 2), "");
  EXPECT_EQ(check_layout(detect_layout(lookup({})), 0, 1, 0, 1), "");
  // Unknown values are not compared.
  EXPECT_EQ(check_layout(detect_layout(lookup({{"PMIX_RANK", "2"}})), 2, 8, 0, 4), "");
}

TEST(RankLayout, CheckLayoutDisagreeing) {
  EXPECT_EQ(check_layout(detect_layout(lookup(kSrunPmix)), 1, 2, 1, 1),
            "the slurm launcher variables disagree with MPI: SLURM_PROCID=3 but MPI rank 1; SLURM_STEP_NUM_TASKS=4 "
            "but MPI size 2; SLURM_STEP_TASKS_PER_NODE[1]=2 but MPI local size 1; dlscale uses MPI's values (check "
            "how the job was started, e.g. srun --mpi=pmix or mpirun)");
  // Launched by something dlscale does not read (e.g. MPICH's hydra).
  EXPECT_EQ(check_layout(detect_layout(lookup({})), 2, 4, 2, 4),
            "dlscale found no launcher variables (Open MPI, Slurm or PMIx) and expected one process, but MPI "
            "reports rank 2 of 4 (local rank 2 of 4); dlscale uses MPI's values (check how the job was started, e.g. "
            "srun --mpi=pmix or mpirun)");
}

// srun whose --mpi does not match the MPI library (--mpi=none, say): every
// task initializes MPI as a one-rank job, so MPI_COMM_WORLD has 1 rank while
// srun started 4. Refused, whatever the task's own number.
TEST(RankLayout, SplitLaunchUnderSrunIsRefused) {
  const std::string advice =
      "srun's --mpi plugin does not match this MPI library: start the job with srun --mpi=pmix (Open MPI; srun "
      "--mpi=list shows the plugins) or with mpirun inside the allocation";
  EXPECT_EQ(split_launch_error(detect_layout(lookup(kSrunPmix)), 1),
            "srun started 4 tasks (SLURM_STEP_NUM_TASKS=4), but MPI_COMM_WORLD has 1 rank: each task started its own "
            "one-rank MPI job, so several tasks would act as rank 0 and write the same run folder; " +
                advice);
  const Env task0 = merged({{"SLURM_PROCID", "0"}, {"SLURM_NODEID", "0"}}, kSrunPmix);
  EXPECT_NE(split_launch_error(detect_layout(lookup(task0)), 1), "");
  // Older Slurm: the job-wide count is the one named.
  Env old_slurm = kSrunPmix;
  old_slurm.erase("SLURM_STEP_NUM_TASKS");
  EXPECT_EQ(split_launch_error(detect_layout(lookup(old_slurm)), 1).rfind("srun started 4 tasks (SLURM_NTASKS=4)", 0),
            0u);
  EXPECT_NE(split_launch_error(detect_layout(lookup(kSrunPmix)), 2)
                .find("MPI_COMM_WORLD has 2 ranks: the tasks started as several smaller MPI jobs"),
            std::string::npos);
  // mpirun of another MPI library than dlscale's.
  EXPECT_EQ(split_launch_error(detect_layout(lookup(kMpirun)), 1),
            "mpirun started 2 ranks (OMPI_COMM_WORLD_SIZE=2), but MPI_COMM_WORLD has 1 rank: each task started its "
            "own one-rank MPI job, so several tasks would act as rank 0 and write the same run folder; that mpirun "
            "belongs to another MPI library than this dlscale: start the job with the mpirun of the MPI library "
            "dlscale was built with, or with srun --mpi=pmix");
}

// The launches that are one MPI job, however the variables look.
TEST(RankLayout, LegitimateLaunchesAreNotSplit) {
  EXPECT_EQ(split_launch_error(detect_layout(lookup(kSrunPmix)), 4), "");
  EXPECT_EQ(split_launch_error(detect_layout(lookup(kMpirun)), 2), "");
  EXPECT_EQ(split_launch_error(detect_layout(lookup({})), 1), "");  // a singleton
  // The batch shell of a 4-task job runs one process (SLURM_NTASKS=4 is the job's).
  EXPECT_EQ(split_launch_error(detect_layout(lookup(kBatchShell)), 1), "");
  // mpirun inside the allocation: Open MPI's variables, 4 ranks.
  Env inside = merged({{"OMPI_COMM_WORLD_RANK", "0"},
                       {"OMPI_COMM_WORLD_SIZE", "4"},
                       {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}},
                      kBatchShell);
  EXPECT_EQ(split_launch_error(detect_layout(lookup(inside)), 4), "");
  // A bare PMIx launch does not say its size.
  EXPECT_EQ(split_launch_error(detect_layout(lookup({{"PMIX_RANK", "0"}})), 1), "");
  // A launcher dlscale does not read, started by a one-task srun step: MPI's world is the larger one.
  Env step = merged({{"SLURM_STEP_NUM_TASKS", "1"}, {"SLURM_STEP_TASKS_PER_NODE", "1"}, {"SLURM_PROCID", "0"},
                     {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"}},
                    kSrunPmix);
  EXPECT_EQ(split_launch_error(detect_layout(lookup(step)), 4), "");
}

}  // namespace
}  // namespace dlscale
