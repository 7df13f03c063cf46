// Generated job scripts against golden files (tests/slurm/golden/), plus the
// properties a golden file cannot show: bash parses them, values that cannot
// go into a script are refused, a Slurm script run with stand-ins for srun
// and scontrol requeues itself exactly when rank 0 left the preemption
// marker, and every job and task trains into a checkpoint folder of its own.
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "golden.h"
#include "synthetic_data.h"
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

// A node range asks for CPUs and GPUs per node, not tasks per node (which
// would make Slurm allocate MIN nodes always); srun starts the tasks per node.
TEST(JobScript, NodeRangeAsksForCpusPerNodeAndSrunPlacesTheTasks) {
  ScriptSpec s = base_spec("slurm");
  s.profile.nodes = 4;
  s.profile.min_nodes = 3;
  s.profile.tasks_per_node = 2;
  s.profile.cpus_per_task = 8;
  s.profile.gpus_per_task = 1;
  std::string script = job_script(s);
  EXPECT_NE(script.find("#SBATCH --nodes=3-4\n#SBATCH --mincpus=16\n#SBATCH --gpus-per-node=2\n"), std::string::npos) << script;
  EXPECT_EQ(script.find("#SBATCH --ntasks-per-node"), std::string::npos) << script;
  EXPECT_EQ(script.find("#SBATCH --gpus-per-task"), std::string::npos) << script;
  EXPECT_NE(script.find("srun --mpi='pmix' --kill-on-bad-exit=1 --ntasks-per-node=2 --cpus-per-task=8 --gpus-per-task=1"), std::string::npos) << script;
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
  EXPECT_NE(script.find("--resume auto '--checkpoint-minutes' '30' '--checkpoint-keep' '2' '--seed' '1' &\n"),
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

// Runs a Slurm job script with stand-ins for srun (it records its arguments,
// leaves the preemption marker when asked, as rank 0 does after its
// checkpoint, and exits with srun_exit) and scontrol (it records its arguments).
struct ScriptRun {
  int exit_code = -1;
  std::string out, srun_calls, scontrol_calls, exit_status;
  bool marker_left = false;  // run/preempted exists after the script
};
struct StandIns {
  int srun_exit = 0;
  bool srun_leaves_marker = false;  // what rank 0 does once it stopped at a checkpoint
  bool srun_leaves_lost_rank = false;  // what a rank's watchdog does when the others stopped answering
  bool srun_leaves_lost_hosts = false; // ... and names the silent host, node2
  bool srun_hangs = false;             // srun then waits without end (a step on a restarted node)
  bool stale_marker = false;        // a marker left by an earlier start
  bool finished_before = false;     // run/model.h5 exists
  std::string restart_count;        // SLURM_RESTART_COUNT, when set
  std::string pmix_fence;           // SLURM_PMIX_FENCE, when set
  std::string profile_fence;        // the profile's pmix-fence, when set
};
ScriptRun run_with_stand_ins(const std::string& name, const StandIns& how) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("dlscale-stand-ins-" + std::to_string(getpid()) + "-" + name);
  fs::remove_all(dir);
  fs::create_directories(dir / "bin");
  fs::create_directories(dir / "job" / "run");
  const fs::path marker = dir / "job" / "run" / kPreemptedMarker;
  if (how.finished_before) std::ofstream(dir / "job" / "run" / "model.h5") << "weights";
  if (how.stale_marker) std::ofstream(marker) << "iteration 50\n";
  std::ofstream(dir / "bin" / "srun") << "#!/bin/bash\necho \"$* (SLURM_PMIX_FENCE=${SLURM_PMIX_FENCE-unset})\" >>"
                                      << shell_quote((dir / "srun.calls").string())
                                      << "\n"
                                      << (how.srun_leaves_marker ? "echo 'iteration 150' >" + shell_quote(marker.string()) : "")
                                      << (how.srun_leaves_lost_rank
                                              ? "\necho 'rank 0 waited 30 s in the gradient all-reduce' >" +
                                                    shell_quote((dir / "job" / "run" / kLostRankMarker).string())
                                              : "")
                                      << (how.srun_leaves_lost_hosts
                                              ? "\necho node2 >" +
                                                    shell_quote((dir / "job" / "run" / kLostHostsFile).string())
                                              : "")
                                      << (how.srun_hangs ? "\nexec sleep 600" : "")
                                      << "\nexit " << how.srun_exit << "\n";
  std::ofstream(dir / "bin" / "scontrol") << "#!/bin/bash\necho \"$*\" >>"
                                          << shell_quote((dir / "scontrol.calls").string()) << "\n";
  for (const char* tool : {"srun", "scontrol"}) fs::permissions(dir / "bin" / tool, fs::perms::owner_all);
  ScriptSpec s = base_spec("slurm");
  if (!how.profile_fence.empty()) s.profile.pmix_fence = how.profile_fence;
  s.job_dir = (dir / "job").string();
  s.submit_dir = dir.string();
  std::ofstream(dir / "job.sh") << job_script(s);
  const std::string command = "env PATH=" + shell_quote((dir / "bin").string()) +
                              ":\"$PATH\" SLURM_JOB_ID=4242 DLSCALE_LOST_RANK_GRACE=2 " +
                              (how.restart_count.empty() ? "" : "SLURM_RESTART_COUNT=" + how.restart_count + " ") +
                              (how.pmix_fence.empty() ? "" : "SLURM_PMIX_FENCE=" + how.pmix_fence + " ") +
                              "bash " + shell_quote((dir / "job.sh").string()) + " >" + shell_quote((dir / "out").string()) +
                              " 2>&1";
  const int status = std::system(command.c_str());
  ScriptRun run{WIFEXITED(status) ? WEXITSTATUS(status) : -1, testing::read_file(dir / "out"),
                testing::read_file(dir / "srun.calls"), testing::read_file(dir / "scontrol.calls"),
                read_record((dir / "job").string(), "exit-status"), fs::exists(marker)};
  fs::remove_all(dir);
  return run;
}

// A node that reboots faster than Slurm's node timeout is no node failure to
// Slurm: the other ranks' watchdog ends the job (exit 1) and leaves
// run/lost-rank, and the script requeues, at most 3 times in the job's life.
TEST(JobScript, LostRankMarkerRequeuesAtMostThreeTimes) {
  for (const std::string count : {"", "2"}) {
    ScriptRun r = run_with_stand_ins("lost-" + count, {.srun_exit = 1, .srun_leaves_lost_rank = true, .restart_count = count});
    EXPECT_EQ(r.scontrol_calls, "requeue 4242\n") << r.out;
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_NE(r.out.find("dlscale: ranks stopped answering (rank 0 waited 30 s in the gradient all-reduce); requeueing "
                         "Slurm job 4242 to resume from the last checkpoint (requeue " +
                         std::to_string(count.empty() ? 1 : 3) + " of at most 3)"),
              std::string::npos)
        << r.out;
  }
  ScriptRun r = run_with_stand_ins("lost-3", {.srun_exit = 1, .srun_leaves_lost_rank = true, .restart_count = "3"});
  EXPECT_EQ(r.scontrol_calls, "") << "a fourth start must not requeue:\n" << r.out;
  EXPECT_EQ(r.exit_code, 1) << r.out;
}

// The silent host the watchdog named stays out of the requeued start:
// Slurm still counts a node rebooted faster than its timeout as healthy.
// Only a pending job's excluded nodes can change: a requeued job is pending
// (and completing) until the script ends, so the update follows the requeue.
TEST(JobScript, LostRankRequeueExcludesTheSilentHosts) {
  ScriptRun r = run_with_stand_ins(
      "lost-hosts", {.srun_exit = 1, .srun_leaves_lost_rank = true, .srun_leaves_lost_hosts = true});
  EXPECT_EQ(r.scontrol_calls, "requeue 4242\nshow job 4242\nupdate JobId=4242 ExcNodeList=node2\n") << r.out;
  EXPECT_EQ(r.exit_code, 3) << r.out;
  EXPECT_NE(r.out.find("dlscale: the requeued start excludes node2"), std::string::npos) << r.out;
}

// srun --mpi=pmix runs with Slurm's ring fence even when the submitting
// shell set another (sbatch passes its environment on): Slurm 22.05's tree
// fence spans only the local node when TreeWidth exceeds the node count,
// which let ranks leave MPI_Init before the other nodes joined
// (cluster_startup_barrier tests the real fence; docs/running.md). Only the
// profile's pmix-fence changes it.
TEST(JobScript, PmixJobsUseTheRingFenceUnlessTheProfileSaysOtherwise) {
  EXPECT_NE(run_with_stand_ins("fence-default", {}).srun_calls.find("(SLURM_PMIX_FENCE=ring)"), std::string::npos);
  const std::string inherited = run_with_stand_ins("fence-tree", {.pmix_fence = "tree"}).srun_calls;
  EXPECT_NE(inherited.find("(SLURM_PMIX_FENCE=ring)"), std::string::npos) << inherited;
  const std::string chosen = run_with_stand_ins("fence-profile", {.profile_fence = "mixed"}).srun_calls;
  EXPECT_NE(chosen.find("(SLURM_PMIX_FENCE=mixed)"), std::string::npos) << chosen;
}

// The ranks left run/lost-rank, but srun waits without end (for the step on
// a node restarted faster than Slurm's node timeout): the script ends srun
// after the grace period (2 s here, 60 by default) and requeues.
TEST(JobScript, SrunThatWaitsAfterTheLostRankMarkerIsEndedAndTheJobRequeues) {
  const auto t0 = std::chrono::steady_clock::now();
  ScriptRun r = run_with_stand_ins("lost-hang", {.srun_exit = 0, .srun_leaves_lost_rank = true, .srun_hangs = true});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 60) << "the script waited for srun's 600 s:\n" << r.out;
  EXPECT_NE(r.out.find(" s after run/lost-rank appeared; ending it"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.scontrol_calls, "requeue 4242\n") << r.out;
  EXPECT_EQ(r.exit_code, 3) << r.out;
}

// srun's exit code is the highest task code or 128+signal: what requeues is
// the marker rank 0 leaves after its checkpoint, whatever srun returned, and
// nothing else (an error exit, even exit 3, never requeues).
TEST(JobScript, PreemptionMarkerRequeuesTheJobAndOnlyThat) {
  for (int code : {3, 137, 1, 0}) {
    ScriptRun r = run_with_stand_ins("preempted-" + std::to_string(code), {.srun_exit = code, .srun_leaves_marker = true});
    EXPECT_EQ(r.scontrol_calls, "requeue 4242\n") << "srun exit " << code << ":\n" << r.out;
    EXPECT_EQ(r.exit_code, 3) << r.out;
    EXPECT_EQ(r.exit_status, "3");
    EXPECT_NE(r.srun_calls.find(" train "), std::string::npos) << r.srun_calls;
    EXPECT_NE(r.srun_calls.find("/run --checkpoint-path "), std::string::npos) << r.srun_calls;
    EXPECT_NE(r.srun_calls.find(" --resume auto (SLURM_PMIX_FENCE=ring)\n"), std::string::npos) << r.srun_calls;
    EXPECT_NE(r.out.find("dlscale: preempted (iteration 150); requeueing Slurm job 4242"), std::string::npos) << r.out;
  }
  for (int code : {3, 0, 1, 137, 143}) {
    ScriptRun r = run_with_stand_ins("exit-" + std::to_string(code), {.srun_exit = code});
    EXPECT_EQ(r.exit_code, code) << r.out;
    EXPECT_EQ(r.exit_status, std::to_string(code));
    EXPECT_FALSE(r.srun_calls.empty());
    EXPECT_EQ(r.scontrol_calls, "") << "srun exit " << code << " without the marker must not requeue";
  }
  // A marker an earlier start left behind is gone before training starts again.
  ScriptRun stale = run_with_stand_ins("stale", {.srun_exit = 1, .stale_marker = true});
  EXPECT_EQ(stale.scontrol_calls, "") << "a stale marker requeued a failed job";
  EXPECT_FALSE(stale.marker_left);
  EXPECT_EQ(stale.exit_code, 1) << stale.out;
}

TEST(JobScript, RequeuedStartSaysSoAndAFinishedRunIsNotTrainedAgain) {
  ScriptRun again = run_with_stand_ins("again", {.restart_count = "1"});
  EXPECT_NE(again.out.find("started again after a requeue (restart 1)"), std::string::npos) << again.out;
  ScriptRun done = run_with_stand_ins("done", {.srun_exit = 1, .finished_before = true});
  EXPECT_EQ(done.exit_code, 0) << done.out;
  EXPECT_EQ(done.srun_calls, "") << "a finished run was trained again";
  EXPECT_EQ(done.exit_status, "0");
}

// The checkpoint folder a submitted job's task trains into: its job script
// run with a stand-in srun, the --checkpoint-path that srun was given.
class OwnCheckpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() / ("dlscale-own-checkpoints-" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "bin");
    std::ofstream(dir / "bin" / "srun") << "#!/bin/bash\necho \"$*\" >" << shell_quote((dir / "srun.args").string()) << "\n";
    std::filesystem::permissions(dir / "bin" / "srun", std::filesystem::perms::owner_all);
    std::ofstream(dir / "shared.ini") << "train-data = data\ncheckpoint-path = " << (dir / "shared").string() << "\n";
    std::ofstream(dir / "other.ini") << "train-data = data\ncheckpoint-path = " << (dir / "other").string() << "\n";
    std::ofstream(dir / "plain.ini") << "train-data = data\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir); }

  JobRecord submit(const std::vector<std::string>& configs, const TrainArgs& train_args = {}) {
    JobRequest r;
    r.profile.name = "cluster";
    r.profile.type = "slurm";
    r.profile.job_root = (dir / "jobs").string();
    r.name = "trial";
    for (const auto& c : configs) r.configs.push_back((dir / c).string());
    r.train_args = train_args;
    r.dry_run = true;
    r.dlscale = "/opt/dlscale/bin/dlscale";
    return submit_job(r);
  }
  // The --checkpoint-path value task `task` of the job trains with.
  std::string checkpoints_of(const JobRecord& job, int task = 0) {
    const std::string command = "env PATH=" + shell_quote((dir / "bin").string()) +
                                ":\"$PATH\" SLURM_JOB_ID=7 SLURM_ARRAY_TASK_ID=" + std::to_string(task) + " bash " +
                                shell_quote(job.dir + "/job.sh") + " >/dev/null 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    const std::string args = testing::read_file(dir / "srun.args");
    std::filesystem::remove(dir / "srun.args");
    const std::string option = "--checkpoint-path ";
    const auto at = args.find(option);
    EXPECT_NE(at, std::string::npos) << args;
    EXPECT_EQ(args.find(option, at + 1), std::string::npos) << "--checkpoint-path given twice: " << args;
    if (at == std::string::npos) return "";
    const auto from = at + option.size();
    return args.substr(from, args.find(' ', from) - from);
  }

  std::filesystem::path dir;
};

TEST_F(OwnCheckpoints, EachJobAndTaskTrainsIntoAFolderOfItsOwn) {
  // No checkpoint-path: inside the job's own run directory.
  JobRecord plain = submit({"plain.ini"});
  EXPECT_EQ(checkpoints_of(plain), plain.dir + "/run/checkpoints");
  // The config's checkpoint-path is shared by every job using it: each job gets a folder in it.
  JobRecord a = submit({"shared.ini"}), b = submit({"shared.ini"});
  EXPECT_EQ(checkpoints_of(a), (dir / "shared" / a.folder).string());
  EXPECT_EQ(checkpoints_of(b), (dir / "shared" / b.folder).string());
  EXPECT_NE(a.folder, b.folder);
  // A job array (a sweep): one folder per task.
  JobRecord array = submit({"shared.ini", "shared.ini"});
  EXPECT_EQ(checkpoints_of(array, 0), (dir / "shared" / array.folder / "trials" / "0").string());
  EXPECT_EQ(checkpoints_of(array, 1), (dir / "shared" / array.folder / "trials" / "1").string());
  JobRecord plain_array = submit({"plain.ini", "plain.ini"});
  EXPECT_EQ(checkpoints_of(plain_array, 1), plain_array.dir + "/trials/1/run/checkpoints");
  // --checkpoint-path among the train options names the shared folder the same way.
  JobRecord option = submit({"plain.ini"}, {"--checkpoint-path", (dir / "other").string(), "--seed", "1"});
  EXPECT_EQ(checkpoints_of(option), (dir / "other" / option.folder).string());
  JobRecord option_eq = submit({"shared.ini"}, {"--checkpoint-path=" + (dir / "other").string()});
  EXPECT_EQ(checkpoints_of(option_eq), (dir / "other" / option_eq.folder).string());
  // One script serves every task of an array: configs naming different folders are refused.
  try {
    submit({"shared.ini", "other.ini"});
    ADD_FAILURE() << "an array with two checkpoint folders was accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("must name the same checkpoint folder"), std::string::npos) << e.what();
  }
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
  EXPECT_EQ(without_data_options({"--test-data", "x", "--seed", "1", "--train-data=y"}), (TrainArgs{"--seed", "1"}));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dlscale
