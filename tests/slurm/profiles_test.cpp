// The profiles file: every key read into its field, the default chosen by
// --profile > DLSCALE_PROFILE > the file > local, and each mistake an error
// naming the file, line, section and key.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "runtime/core/error.h"
#include "slurm/profiles.h"
#include "slurm/jobs.h"

namespace dlscale {
namespace {

const char* kFile = R"(# my clusters
default = gpu

[local]
tasks-per-node = 2
job-root = /tmp/local-jobs

[gpu]
type = slurm
partition = gpu          # the A100 nodes
account = proj-123
qos = normal
time = 1-02:00:00
nodes = 2
tasks-per-node = 4
gpus-per-task = 1
cpus-per-task = 8
sbatch = --constraint=a100
sbatch = --exclusive
module = cuda/12.2 cudnn
module = openmpi
stage-data = true
stage-dir = $SLURM_TMPDIR
signal-lead = 600
job-root = /scratch/me/jobs#1

[cpu-nodes]
type = slurm
gpus-per-node = 0
mpi = pmi2
pmix-fence = tree
)";

std::string error_of(const std::string& text) {
  try {
    parse_profiles(text, "/home/u/profiles.ini");
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Profiles, EveryKeyIsRead) {
  ProfileSet set = parse_profiles(kFile, "/p.ini");
  ASSERT_EQ(set.profiles.size(), 3u);
  const Profile& local = *set.find("local");
  EXPECT_EQ(local.type, "local");
  EXPECT_EQ(local.tasks_per_node, 2);
  EXPECT_EQ(local.job_root, "/tmp/local-jobs");
  const Profile& gpu = *set.find("gpu");
  EXPECT_TRUE(gpu.is_slurm());
  EXPECT_EQ(gpu.source, "/p.ini");
  EXPECT_EQ(gpu.partition, "gpu");
  EXPECT_EQ(gpu.account, "proj-123");
  EXPECT_EQ(gpu.qos, "normal");
  EXPECT_EQ(gpu.time, "1-02:00:00");
  EXPECT_EQ(gpu.nodes, 2);
  EXPECT_EQ(gpu.tasks_per_node, 4);
  EXPECT_EQ(gpu.gpus_per_task, 1);
  EXPECT_EQ(gpu.cpus_per_task, 8);
  EXPECT_EQ(gpu.sbatch_options, (std::vector<std::string>{"--constraint=a100", "--exclusive"}));
  EXPECT_EQ(gpu.modules, (std::vector<std::string>{"cuda/12.2", "cudnn", "openmpi"}));
  EXPECT_TRUE(gpu.stage_data);
  EXPECT_EQ(gpu.stage_dir, "$SLURM_TMPDIR");
  EXPECT_EQ(gpu.signal_lead, 600);
  EXPECT_EQ(gpu.job_root, "/scratch/me/jobs#1");  // '#' without a space before it is part of the value
  EXPECT_EQ(set.find("cpu-nodes")->mpi, "pmi2");
  EXPECT_EQ(set.find("cpu-nodes")->pmix_fence, "tree");
  EXPECT_EQ(gpu.pmix_fence, "ring");  // the default: the fence that cannot crash MPI_Init
  EXPECT_EQ(set.find("cpu-nodes")->job_root, "~/dlscale-jobs");
  EXPECT_EQ(set.find("cpu-nodes")->signal_lead, 120);  // the default: USR1 two minutes before the time limit
}

TEST(Profiles, DefaultComesFromFlagThenEnvironmentThenFileThenLocal) {
  unsetenv("DLSCALE_PROFILE");
  ProfileSet set = parse_profiles(kFile, "/p.ini");
  EXPECT_EQ(set.select().name, "gpu");
  EXPECT_EQ(set.select("cpu-nodes").name, "cpu-nodes");
  setenv("DLSCALE_PROFILE", "local", 1);
  EXPECT_EQ(set.select().name, "local");
  EXPECT_EQ(set.select("cpu-nodes").name, "cpu-nodes");
  unsetenv("DLSCALE_PROFILE");
  EXPECT_EQ(parse_profiles("[x]\ntype = slurm\n", "/p.ini").select().name, "local");
}

TEST(Profiles, MissingFileGivesTheBuiltInLocalProfile) {
  ProfileSet set = load_profiles("/nonexistent/dlscale/profiles.ini");
  EXPECT_FALSE(set.file_exists);
  ASSERT_EQ(set.profiles.size(), 1u);
  EXPECT_EQ(set.profiles[0].name, "local");
  EXPECT_EQ(set.profiles[0].source, "built-in");
  EXPECT_EQ(set.profiles[0].tasks_per_node, 1);
}

TEST(Profiles, UnknownProfileListsTheKnownOnes) {
  ProfileSet set = parse_profiles(kFile, "/p.ini");
  try {
    set.select("gpus");
    FAIL() << "no error";
  } catch (const UsageError& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("unknown profile 'gpus'"), std::string::npos) << m;
    EXPECT_NE(m.find("local, gpu, cpu-nodes"), std::string::npos) << m;
  }
}

TEST(Profiles, UnknownKeyNamesFileLineSectionAndKey) {
  std::string m = error_of("[gpu]\ntype = slurm\npartiton = gpu\n");
  EXPECT_NE(m.find("/home/u/profiles.ini:3: [gpu] unknown key 'partiton'"), std::string::npos) << m;
  EXPECT_NE(m.find("partition"), std::string::npos) << m;  // the known keys are listed
}

TEST(Profiles, MistakesAreErrors) {
  auto has = [](const std::string& text, const std::string& needle) {
    std::string m = error_of(text);
    EXPECT_NE(m.find(needle), std::string::npos) << "error for:\n" << text << "was: " << m;
  };
  has("[a]\npartition = x\n", "[a] key 'partition' applies to slurm profiles only");
  has("[a]\ntype = pbs\n", ":2: [a] type = pbs: expected local or slurm");
  has("[a]\ntype = slurm\nnodes = two\n", ":3: [a] nodes = two: expected a node count N >= 1 or a range MIN-MAX");
  has("[a]\ntype = slurm\nnodes = 4-3\n", ":3: [a] nodes = 4-3: expected a node count");
  has("[a]\ntype = slurm\nnodes = 0-2\n", ":3: [a] nodes = 0-2: expected a node count");
  has("[a]\ntype = slurm\nnodes = 0\n", ":3: [a] nodes = 0: expected a node count");
  has("[a]\ntype = slurm\ntime = 2 hours\n", "time = 2 hours: expected a Slurm time limit");
  has("[a]\ntype = slurm\nstage-data = maybe\n", "stage-data = maybe: expected true or false");
  has("[a]\ntype = slurm\nqos = x\nqos = y\n", ":4: [a] key 'qos' is given twice");
  has("[a]\ntype = slurm\nsbatch = constraint=a100\n", "expected an sbatch option");
  has("[a]\ntype = slurm\ngpus-per-node = 4\ngpus-per-task = 1\n", "gpus-per-node or gpus-per-task, not both");
  has("[a]\ntype = slurm\nsignal-lead = -1\n", "signal-lead = -1: expected an integer >= 0");
  has("[a]\ntype = slurm\nsignal-lead = 70000\n", "signal-lead = 70000: at most 65535 seconds");
  has("[a]\nsignal-lead = 60\n", "[a] key 'signal-lead' applies to slurm profiles only");
  has("[a]\ntype = slurm\npmix-fence = fast\n", ":3: [a] pmix-fence = fast: expected ring, tree or mixed");
  has("[a]\n[a]\n", ":2: profile [a] is defined twice");
  has("[a b]\n", ":1: bad section header '[a b]'");
  has("[a]\njust words\n", ":2: expected 'key = value'");
  has("partition = gpu\n[a]\n", ":1: unknown key 'partition' before the first [profile]");
  has("default = nope\n[a]\n", ":1: default = nope: no such profile");
  has("[local]\ntype = slurm\n", "[local] is the built-in local profile");
}

// One rank drives one GPU: a profile asking for more per task is refused
// where it is written, and a profile changed after reading (a front end's
// override) is refused by submit before anything is written or submitted.
TEST(Profiles, MoreThanOneGpuPerTaskIsRefused) {
  const std::string m = error_of("[a]\ntype = slurm\n\n[big]\ntype = slurm\ngpus-per-task = 2\n");
  EXPECT_NE(m.find("/home/u/profiles.ini:6: [big] gpus-per-task = 2: each dlscale rank drives one GPU"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("gpus-per-task = 1 and more tasks-per-node"), std::string::npos) << m;
  EXPECT_EQ(parse_profiles("[a]\ntype = slurm\ngpus-per-task = 1\n", "/p").find("a")->gpus_per_task, 1);

  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dlscale-gpus-per-task-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "c.ini") << "train-data = data\n";
  JobRequest r;
  r.profile = parse_profiles("[gpu]\ntype = slurm\ngpus-per-task = 1\njob-root = " + (dir / "jobs").string() + "\n",
                             "/home/u/profiles.ini")
                  .select("gpu");
  r.profile.gpus_per_task = 4;
  r.name = "big";
  r.configs = {(dir / "c.ini").string()};
  r.dry_run = true;
  std::string what;
  try {
    submit_job(r);
  } catch (const UsageError& e) {
    what = e.what();
  }
  EXPECT_NE(what.find("profile gpu (/home/u/profiles.ini): gpus-per-task = 4: each dlscale rank drives one GPU"),
            std::string::npos)
      << what;
  EXPECT_FALSE(fs::exists(dir / "jobs")) << "a refused job left a folder";
  fs::remove_all(dir);
}

TEST(Profiles, TimeFormatsSlurmAccepts) {
  for (const char* t : {"30", "30:00", "02:00:00", "1-12", "1-12:00", "1-12:00:00", "UNLIMITED"})
    EXPECT_EQ(parse_profiles(std::string("[a]\ntype = slurm\ntime = ") + t + "\n", "/p").find("a")->time, t);
}

TEST(Profiles, JobRootsAreAbsoluteAndUnique) {
  const char* old_home = std::getenv("HOME");
  std::string saved = old_home ? old_home : "";
  setenv("HOME", "/home/someone", 1);
  ProfileSet set = parse_profiles("[a]\ntype = slurm\n[b]\ntype = slurm\njob-root = /jobs\n", "/p");
  auto roots = job_roots(set);
  EXPECT_EQ(roots, (std::vector<std::string>{"/home/someone/dlscale-jobs", "/jobs"}));
  EXPECT_EQ(job_roots(set, "b"), (std::vector<std::string>{"/jobs"}));
  EXPECT_THROW(job_roots(set, "c"), UsageError);
  setenv("HOME", saved.c_str(), 1);
}

// nodes = MIN-MAX lets Slurm start or requeue the job on fewer nodes (a node lost).
TEST(Profiles, NodeRangeKeepsTheMinimumAndTheMaximum) {
  ProfileSet set = parse_profiles("[elastic]\ntype = slurm\nnodes = 3-4\ntasks-per-node = 2\n[fixed]\ntype = slurm\nnodes = 2-2\n", "/p.ini");
  const Profile& e = *set.find("elastic");
  EXPECT_EQ(e.nodes, 4);
  EXPECT_EQ(e.min_nodes, 3);
  EXPECT_EQ(e.node_count(), "3-4");
  EXPECT_NE(describe(e).find("3-4 node(s) x 2 task(s)"), std::string::npos) << describe(e);
  EXPECT_EQ(set.find("fixed")->node_count(), "2");
}

TEST(Profiles, DescribeNamesTheResources) {
  ProfileSet set = parse_profiles(kFile, "/p.ini");
  std::string d = describe(*set.find("gpu"));
  EXPECT_NE(d.find("2 node(s) x 4 task(s), 1 GPU(s)/task, 8 CPU(s)/task, partition gpu"), std::string::npos) << d;
  EXPECT_NE(describe(*set.find("local")).find("processes on this machine, 2 rank(s)"), std::string::npos);
}

}  // namespace
}  // namespace dlscale
