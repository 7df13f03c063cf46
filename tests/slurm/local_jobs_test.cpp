// Batch jobs on the local profile, end to end through the dlscale binary:
// submit -> jobs -> fetch, cancel, a failing job, the hostile job name, the
// submit/profiles errors, and the dry-run script of a slurm profile against
// its golden file (no cluster needed for that).
#include "golden.h"
#include "job_helpers.h"
#include "slurm/job_folder.h"
#include "slurm/process.h"

namespace dlscale::testing {
namespace {

class LocalJobs : public JobsTest {
 protected:
  std::string profiles_text() override {
    const std::string root = (dir / "jobs").string();
    return "default = local\n[local]\njob-root = " + root + "\n\n[cluster]\ntype = slurm\npartition = gpu\ntime = 01:00:00\n"
           "nodes = 2\ntasks-per-node = 4\ngpus-per-task = 1\ncpus-per-task = 8\nmodule = cuda\njob-root = " + root + "\n";
  }
};

TEST_F(LocalJobs, SubmitRunsInTheBackgroundAndFetchReturnsTheSummary) {
  std::string folder = submit("--name mlp");
  ASSERT_EQ(folder.rfind("mlp-", 0), 0u) << folder;
  auto rec = record(folder);
  EXPECT_EQ(rec["type"], "local");
  EXPECT_GT(rec["pid"].get<long>(), 0);
  for (const char* f : {"job.sh", "config.ini", "job.json"}) EXPECT_TRUE(fs::exists(dir / "jobs" / folder / f)) << f;
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  ASSERT_EQ(j["state"], "done") << j.dump() << read_file(dir / "jobs" / folder / "log.txt");
  EXPECT_EQ(j["progress"]["epoch"], 3);
  EXPECT_EQ(j["progress"]["max_epochs"], 3);
  EXPECT_EQ(read_record((dir / "jobs" / folder).string(), "exit-status"), "0");
  RunResult table = dlscale("jobs");
  EXPECT_NE(table.out.find(folder), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("done"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("3/3"), std::string::npos) << table.out;
  RunResult f = dlscale("fetch " + folder + " --to " + (dir / "copy").string());
  ASSERT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("test accuracy"), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("\"test_accuracy\""), std::string::npos) << f.out;
  EXPECT_GT(summary(folder)["test_accuracy"].get<double>(), 0.9);
  EXPECT_TRUE(fs::exists(dir / "copy" / "summary.json"));
  EXPECT_TRUE(fs::exists(dir / "copy" / "model.h5"));
  // Cancelling a finished job changes nothing.
  RunResult c = dlscale("cancel " + folder);
  EXPECT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("finished already"), std::string::npos) << c.out;
  EXPECT_EQ(job(folder)["state"], "done");
}

TEST_F(LocalJobs, TwoLocalRanksThroughLaunch) {
  // submit is an MPI singleton; the job must not inherit its MPI environment.
  std::string folder = submit("--name two --tasks-per-node 2");
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  ASSERT_EQ(j["state"], "done") << read_file(dir / "jobs" / folder / "log.txt");
  EXPECT_EQ(summary(folder)["world_size"], 2);
}

TEST_F(LocalJobs, CancelStopsTheJobAndItShowsCancelled) {
  std::string folder = submit("--name long -- --max-epochs 100000");
  wait_for(folder, {"running"});
  RunResult c = dlscale("cancel " + folder);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_NE(c.out.find("cancelled " + folder), std::string::npos) << c.out;
  EXPECT_EQ(job(folder)["state"], "cancelled");
  auto rec = record(folder);
  EXPECT_NE(process_start_time(rec["pid"].get<long>()), rec["pid_start"].get<unsigned long long>())
      << "the job's process is still running";
  RunResult f = dlscale("fetch " + folder);
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.out.find("cancelled"), std::string::npos) << f.out;
}

TEST_F(LocalJobs, FailingJobShowsFailedAndFetchShowsItsLog) {
  std::string folder = submit("--name broken -- --train-data " + (dir / "nowhere").string());
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["detail"].get<std::string>().rfind("exit status ", 0), 0u) << j.dump();  // dlscale train's exit code
  RunResult f = dlscale("fetch " + folder);
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.out.find("nowhere"), std::string::npos) << f.out;  // the error line of the log
}

TEST_F(LocalJobs, HostileNameRunsNothing) {
  fs::remove(kPwned);
  ASSERT_FALSE(fs::exists(kPwned));
  std::string folder = submit("--name " + shell_quote(kHostileName));
  EXPECT_EQ(folder.find_first_of("'; /#"), std::string::npos) << folder;
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  EXPECT_EQ(j["state"], "done") << read_file(dir / "jobs" / folder / "log.txt");
  EXPECT_EQ(record(folder)["name"], kHostileName);
  EXPECT_FALSE(fs::exists(kPwned)) << "part of the job name ran as a command";
}

// The script of a real submit (dry run), with the parts that vary between
// runs replaced: @JOB_DIR@, @SUBMIT_DIR@, @DLSCALE@.
std::string normalized_script(const fs::path& job_dir) {
  std::string script = read_file(job_dir / "job.sh");
  script = replace_all(script, job_dir.string(), "@JOB_DIR@");
  // The binary first: the folder submit ran from may hold it (the build folder).
  script = replace_all(script, dlscale_binary(), "@DLSCALE@");
  return replace_all(script, fs::current_path().string(), "@SUBMIT_DIR@");
}

TEST_F(LocalJobs, DryRunWritesTheGoldenScripts) {
  std::string folder = submit("--profile cluster --dry-run --name " + shell_quote(kHostileName) + " -- --max-epochs 2");
  fs::path job_dir = dir / "jobs" / folder;
  expect_golden("submit-slurm-dry-run.sh", normalized_script(job_dir));
  EXPECT_EQ(job(folder)["state"], "unknown");
  EXPECT_NE(job(folder)["detail"].get<std::string>().find("not submitted"), std::string::npos);
  folder = submit("--dry-run --name mlp");
  expect_golden("submit-local-dry-run.sh", normalized_script(dir / "jobs" / folder));
}

// A profile's data-root is where relative dataset paths of a submitted
// config are found; the job is given the absolute folders.
TEST_F(LocalJobs, DataRootResolvesRelativeDatasetPaths) {
  std::ofstream(dir / "profiles.ini", std::ios::app) << "\n[shared]\ndata-root = " << dir.string() << "\njob-root = " << (dir / "jobs").string()
                                                  << "\n";
  std::ofstream(dir / "relative.ini") << kJobMlp << "train-data = train\ntest-data = test\n";
  RunResult r = dlscale("submit " + (dir / "relative.ini").string() + " --profile shared --dry-run --name rel");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::string folder;
  for (auto& e : fs::directory_iterator(dir / "jobs"))
    if (e.path().filename().string().rfind("rel-", 0) == 0) folder = e.path().filename().string();
  ASSERT_FALSE(folder.empty());
  const std::string script = read_file(dir / "jobs" / folder / "job.sh");
  EXPECT_NE(script.find(shell_quote("--train-data") + " " + shell_quote((dir / "train").string())), std::string::npos)
      << script;
  EXPECT_NE(script.find(shell_quote("--test-data") + " " + shell_quote((dir / "test").string())), std::string::npos)
      << script;
}

// A Slurm job checkpoints every 30 minutes unless its config or options
// choose when; either way it resumes with --resume auto, which is not the
// user's to set.
TEST_F(LocalJobs, SlurmJobsCheckpointUnlessTheConfigChooses) {
  auto script_of = [&](const std::string& config, const std::string& args) {
    RunResult r = dlscale("submit " + config + " --profile cluster --dry-run --name ckpt " + args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::istringstream line(r.out);
    std::string word, folder;
    line >> word >> folder;
    return read_file(dir / "jobs" / folder / "job.sh");
  };
  const std::string defaults = "--resume auto '--checkpoint-minutes' '30' '--checkpoint-keep' '2'";
  EXPECT_NE(script_of((dir / "mlp.ini").string(), "").find(defaults), std::string::npos);
  std::ofstream(dir / "every-epoch.ini") << read_file(dir / "mlp.ini") << "checkpoint-frequency = 1  # every epoch\n";
  std::string script = script_of((dir / "every-epoch.ini").string(), "");
  EXPECT_EQ(script.find("--checkpoint-minutes"), std::string::npos) << script;
  EXPECT_EQ(script.find("--checkpoint-keep"), std::string::npos) << script;
  EXPECT_NE(script.find("--resume auto &\n"), std::string::npos) << script;
  script = script_of((dir / "mlp.ini").string(), "-- --checkpoint-minutes 5");
  EXPECT_NE(script.find("--resume auto '--checkpoint-minutes' '5' &\n"), std::string::npos) << script;
  script = script_of((dir / "mlp.ini").string(), "-- --checkpoint-keep 9");
  EXPECT_NE(script.find("--resume auto '--checkpoint-minutes' '30' '--checkpoint-keep' '9' &\n"), std::string::npos)
      << script;
  RunResult r = dlscale("submit " + (dir / "mlp.ini").string() + " --profile cluster --dry-run -- --resume auto");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--resume is set by the job"), std::string::npos) << r.err;
}

TEST_F(LocalJobs, TwoSubmitsInOneSecondGetTwoFolders) {
  std::string a = submit("--dry-run --name same"), b = submit("--dry-run --name same");
  EXPECT_NE(a, b);
}

TEST_F(LocalJobs, ProfilesCommandListsAndMarksTheDefault) {
  RunResult r = dlscale("profiles");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("* local"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  cluster  slurm  2 node(s) x 4 task(s), 1 GPU(s)/task"), std::string::npos) << r.out;
  setenv("DLSCALE_PROFILE", "cluster", 1);
  r = dlscale("profiles");
  unsetenv("DLSCALE_PROFILE");
  EXPECT_NE(r.out.find("* cluster"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("default: cluster (DLSCALE_PROFILE)"), std::string::npos) << r.out;
}

// One error line naming the mistake, exit code 2.
void expect_usage_error(const RunResult& r, const std::string& needle) {
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.err.rfind("dlscale: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
}

TEST_F(LocalJobs, MistakesAreOneClearError) {
  const std::string config = (dir / "mlp.ini").string();
  expect_usage_error(dlscale("submit " + config + " --profile nope"), "unknown profile 'nope'");
  expect_usage_error(dlscale("submit " + config + " -- --output x"), "--output is set by the job");
  expect_usage_error(dlscale("submit " + (dir / "none.ini").string()), "cannot open config file");
  expect_usage_error(dlscale("submit " + config + " --nodes 2"), "--nodes needs a slurm profile");
  expect_usage_error(dlscale("submit " + config + " --stage-data true"), "needs a slurm profile");
  expect_usage_error(dlscale("submit " + config + " --prof cluster"), "prof");  // no prefix guessing
  expect_usage_error(dlscale("fetch no-such-job"), "no job 'no-such-job'");
  expect_usage_error(dlscale("cancel"), "give the job");
  std::ofstream(dir / "profiles.ini", std::ios::app) << "[typo]\ntype = slurm\ngpus-per-tsk = 1\n";
  expect_usage_error(dlscale("profiles"), (dir / "profiles.ini").string() + ":17: [typo] unknown key 'gpus-per-tsk'");
  EXPECT_FALSE(fs::exists(dir / "jobs")) << "a refused submit left a job folder";
}

}  // namespace
}  // namespace dlscale::testing
