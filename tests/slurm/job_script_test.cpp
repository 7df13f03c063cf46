// Generated job scripts against golden files (tests/slurm/golden/), plus the
// properties a golden file cannot show: bash parses them, and values that
// cannot go into a script are refused.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "golden.h"
#include "slurm/jobs.h"

namespace dlscale {
namespace {

using testing::expect_golden;

ScriptSpec base_spec(const std::string& type) {
  ScriptSpec s;
  s.profile.name = type == "slurm" ? "cluster" : "local";
  s.profile.type = type;
  s.job_name = "mlp";
  s.job_dir = "/jobs/mlp-20260101-120000";
  s.submit_dir = "/home/me/project";
  s.dlscale = "/opt/dlscale/bin/dlscale";
  return s;
}

// bash -n: the script parses.
void expect_valid_bash(const std::string& script) {
  const auto path = std::filesystem::temp_directory_path() / ("dlscale-script-" + std::to_string(getpid()) + ".sh");
  std::ofstream(path) << script;
  EXPECT_EQ(std::system(("bash -n " + path.string()).c_str()), 0) << script;
  std::filesystem::remove(path);
}

TEST(JobScript, SlurmDefaults) {
  ScriptSpec s = base_spec("slurm");
  std::string script = job_script(s);
  expect_golden("slurm-defaults.sh", script);
  expect_valid_bash(script);
}

TEST(JobScript, SlurmWithEveryProfileField) {
  ScriptSpec s = base_spec("slurm");
  Profile& p = s.profile;
  p.partition = "gpu";
  p.account = "proj-123";
  p.qos = "normal";
  p.time = "02:00:00";
  p.nodes = 2;
  p.tasks_per_node = 4;
  p.cpus_per_task = 8;
  p.gpus_per_task = 1;
  p.sbatch_options = {"--constraint=a100&nvlink", "--exclusive", "-C big", "--comment=it's \"quoted\""};
  p.modules = {"cuda/12.2", "openmpi"};
  s.train_args = {"--max-epochs", "3", "--seed", "a b'c"};
  std::string script = job_script(s);
  expect_golden("slurm-gpus-per-task.sh", script);
  expect_valid_bash(script);
}

TEST(JobScript, SlurmGpusPerNodeLetsEachRankSeeAllGpus) {
  ScriptSpec s = base_spec("slurm");
  s.profile.gpus_per_node = 4;
  s.profile.tasks_per_node = 4;
  std::string script = job_script(s);
  expect_golden("slurm-gpus-per-node.sh", script);
  EXPECT_NE(script.find("--gpu-bind=none"), std::string::npos);
}

TEST(JobScript, SlurmDataStaging) {
  ScriptSpec s = base_spec("slurm");
  s.profile.stage_data = true;
  s.profile.stage_dir = "$LOCAL_SCRATCH/dl data";
  s.staged = {{"train-data", "/shared/fashion-mnist/train"},
              {"validation-data", "/shared/fashion-mnist/test"},
              {"test-data", "/shared/fashion-mnist/test"}};
  s.train_args = {"--max-epochs", "1"};
  std::string script = job_script(s);
  expect_golden("slurm-staging.sh", script);
  expect_valid_bash(script);
}

TEST(JobScript, SlurmJobArrayForSweeps) {
  ScriptSpec s = base_spec("slurm");
  s.job_name = "sweep";
  s.job_dir = "/jobs/sweep-20260101-120000";
  s.array_size = 4;
  s.array_parallel = 2;
  std::string script = job_script(s);
  expect_golden("slurm-array.sh", script);
  expect_valid_bash(script);
}

TEST(JobScript, Local) {
  ScriptSpec s = base_spec("local");
  std::string script = job_script(s);
  expect_golden("local.sh", script);
  expect_valid_bash(script);
  s.profile.tasks_per_node = 2;
  script = job_script(s);
  expect_golden("local-2-ranks.sh", script);
  EXPECT_NE(script.find("launch -n 2 -- train"), std::string::npos);
}

TEST(JobScript, HostileNameAndPathsAreQuoted) {
  ScriptSpec s = base_spec("slurm");
  s.job_name = "'; touch /tmp/pwned #";
  s.job_dir = "/jobs/it's 100% \"odd\"; ls";
  s.submit_dir = "/home/me/$(reboot)";
  s.profile.partition = "gpu\"; echo";
  std::string script = job_script(s);
  expect_golden("slurm-hostile.sh", script);
  expect_valid_bash(script);
}

TEST(JobScript, RefusedValues) {
  ScriptSpec s = base_spec("slurm");
  s.job_name = "two\nlines";
  EXPECT_THROW(job_script(s), UsageError);
  s = base_spec("slurm");
  s.profile.sbatch_options = {"--x=1\n#SBATCH --y"};
  EXPECT_THROW(job_script(s), UsageError);
  s = base_spec("slurm");
  s.profile.sbatch_options = {"constraint=a100"};
  EXPECT_THROW(job_script(s), UsageError);
  s = base_spec("local");
  s.staged = {{"train-data", "/d"}};
  EXPECT_THROW(job_script(s), UsageError);  // staging is for Slurm nodes
  s = base_spec("local");
  s.profile.nodes = 2;
  EXPECT_THROW(job_script(s), UsageError);
}

TEST(DataFolders, ConfigThenCommandLineMadeAbsolute) {
  const auto dir = std::filesystem::temp_directory_path() / ("dlscale-df-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "c.ini") << "train-data = data/train   # the shards\n"
                                  "validation-data = /abs/val\n"
                                  "test-data = data/test\n"
                                  "layer = dense units=4\n";
  auto folders = data_folders((dir / "c.ini").string(), {"--test-data", "other/test", "--max-epochs", "2"}, "/work");
  ASSERT_EQ(folders.size(), 3u);
  EXPECT_EQ(folders[0].option, "train-data");
  EXPECT_EQ(folders[0].source, "/work/data/train");
  EXPECT_EQ(folders[1].source, "/abs/val");
  EXPECT_EQ(folders[2].source, "/work/other/test");
  EXPECT_EQ(without_data_options({"--test-data", "x", "--seed", "1", "--train-data=y"}), (Args{"--seed", "1"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlscale
