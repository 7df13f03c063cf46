// Generated job scripts against golden files (tests/slurm/golden/), plus the
// properties a golden file cannot show: bash parses them, values that cannot
// go into a script are refused, and a Slurm script run with stand-ins for
// srun and scontrol requeues itself exactly when the training exits with 3.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "golden.h"
#include "slurm/jobs.h"
#include "slurm/quoting.h"

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

TEST(JobScript, SlurmJobIsPreemptionReady) {
  ScriptSpec s = base_spec("slurm");
  s.profile.signal_lead = 300;
  s.profile.sbatch_options = {"--signal=B:USR2@60"};
  s.checkpoint_defaults = {"--checkpoint-minutes", "30", "--checkpoint-keep", "2"};
  s.train_args = {"--seed", "1"};
  std::string script = job_script(s);
  expect_golden("slurm-preemption.sh", script);
  expect_valid_bash(script);
  // The profile's own sbatch options come later, so they win over the defaults.
  EXPECT_LT(script.find("#SBATCH --signal=USR1@300\n"), script.find("#SBATCH --signal=\"B:USR2@60\"\n"));
  EXPECT_NE(script.find("--resume auto '--checkpoint-minutes' '30' '--checkpoint-keep' '2' '--seed' '1' || status=$?\n"),
            std::string::npos)
      << script;
  s.profile.signal_lead = 0;
  script = job_script(s);
  EXPECT_EQ(script.find("#SBATCH --signal=USR1"), std::string::npos) << script;
  EXPECT_NE(script.find("#SBATCH --requeue\n#SBATCH --open-mode=append\n"), std::string::npos) << script;
  EXPECT_NE(script.find("scontrol requeue \"$SLURM_JOB_ID\""), std::string::npos) << script;
  // The local script has no Slurm to requeue it and resumes nothing by itself.
  script = job_script(base_spec("local"));
  EXPECT_EQ(script.find("--resume"), std::string::npos) << script;
  EXPECT_EQ(script.find("scontrol"), std::string::npos) << script;
}

// Runs a Slurm job script with stand-ins for srun (it records its arguments
// and exits with srun_exit) and scontrol (it records its arguments).
struct ScriptRun {
  int exit_code = -1;
  std::string out, srun_calls, scontrol_calls, exit_status;
};
ScriptRun run_with_stand_ins(const std::string& name, int srun_exit, bool finished_before = false,
                             const std::string& restart_count = "") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dlscale-stand-ins-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "job" / "run");
  if (finished_before) std::ofstream(dir / "job" / "run" / "model.h5") << "weights";
  for (const char* tool : {"srun", "scontrol"}) {
    std::ofstream(dir / "bin" / tool) << "#!/bin/bash\necho \"$*\" >>" << shell_quote((dir / tool).string() + ".calls")
                                      << "\n" << (tool == std::string("srun") ? "exit " + std::to_string(srun_exit) : "")
                                      << "\n";
    fs::permissions(dir / "bin" / tool, fs::perms::owner_all);
  }
  ScriptSpec s = base_spec("slurm");
  s.job_dir = (dir / "job").string();
  s.submit_dir = dir.string();
  std::ofstream(dir / "job.sh") << job_script(s);
  const std::string command = "env PATH=" + shell_quote((dir / "bin").string()) + ":\"$PATH\" SLURM_JOB_ID=4242 " +
                              (restart_count.empty() ? "" : "SLURM_RESTART_COUNT=" + restart_count + " ") + "bash " +
                              shell_quote((dir / "job.sh").string()) + " >" + shell_quote((dir / "out").string()) + " 2>&1";
  const int status = std::system(command.c_str());
  auto text = [&](const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  };
  ScriptRun run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, text(dir / "out"), text(dir / "srun.calls"),
                text(dir / "scontrol.calls"), read_record((dir / "job").string(), "exit-status")};
  fs::remove_all(dir);
  return run;
}

TEST(JobScript, ExitCode3RequeuesTheJobAndOnlyThat) {
  ScriptRun preempted = run_with_stand_ins("preempted", 3);
  EXPECT_EQ(preempted.exit_code, 3) << preempted.out;
  EXPECT_NE(preempted.srun_calls.find(" train "), std::string::npos) << preempted.srun_calls;
  EXPECT_NE(preempted.srun_calls.find("/run --resume auto\n"), std::string::npos) << preempted.srun_calls;
  EXPECT_EQ(preempted.scontrol_calls, "requeue 4242\n");
  EXPECT_EQ(preempted.exit_status, "3");
  EXPECT_NE(preempted.out.find("requeueing Slurm job 4242"), std::string::npos) << preempted.out;

  for (int code : {0, 1, 143}) {
    ScriptRun r = run_with_stand_ins("exit-" + std::to_string(code), code);
    EXPECT_EQ(r.exit_code, code) << r.out;
    EXPECT_EQ(r.exit_status, std::to_string(code));
    EXPECT_FALSE(r.srun_calls.empty());
    EXPECT_EQ(r.scontrol_calls, "") << "exit " << code << " must not requeue";
  }
}

TEST(JobScript, RequeuedStartSaysSoAndAFinishedRunIsNotTrainedAgain) {
  ScriptRun again = run_with_stand_ins("again", 0, false, "1");
  EXPECT_NE(again.out.find("started again after a requeue (restart 1)"), std::string::npos) << again.out;
  ScriptRun done = run_with_stand_ins("done", 1, true);
  EXPECT_EQ(done.exit_code, 0) << done.out;
  EXPECT_EQ(done.srun_calls, "") << "a finished run was trained again";
  EXPECT_EQ(done.exit_status, "0");
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
