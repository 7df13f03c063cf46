// Data staging on a real Slurm cluster (slurm/test-cluster.sh): each node of
// a job holds one verified copy of each dataset while it runs, whatever its
// ranks per node, and none once the job has ended: normally, with a failed
// rank, cancelled (TERM to every step, when no new srun can run), or
// requeued (the next start copies again).
//
// The node list comes from Slurm (the job's NodeList) and each node's folder
// is read on that node through srun, so the test holds on a cluster of many
// nodes with a /tmp each. The stage folder is <scratch>/node-local, or
// $DLSCALE_TEST_NODE_LOCAL_DIR where the scratch folder is shared between
// the nodes (it must be, for the job folders) and node-local storage is not.
#include <regex>

#include "io/staging.h"
#include "job_helpers.h"

namespace dlscale::testing {
namespace {

std::string g_cluster_error;  // why the cluster is not usable, with its logs; empty when it is

class SlurmStaging : public JobsTest {
 protected:
  static void SetUpTestSuite() { g_cluster_error = start_test_cluster(); }
  void SetUp() override {
    ASSERT_TRUE(g_cluster_error.empty()) << g_cluster_error;
    JobsTest::SetUp();
  }
  fs::path node_local() {
    const char* root = std::getenv("DLSCALE_TEST_NODE_LOCAL_DIR");
    return root && *root ? fs::path(root) : dir / "node-local";
  }
  std::string profiles_text() override {
    return "default = staged\n[staged]\ntype = slurm\ntime = 10\nstage-data = true\nstage-dir = " +
           node_local().string() + "\njob-root = " + (dir / "jobs").string() + "\n";
  }
  std::string slurm(const std::string& command) {
    RunResult r = run_command(command, dir);
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.out << r.err;
    return r.out;
  }
  // The job's nodes, from Slurm (scontrol keeps an ended job for MinJobAge).
  std::vector<std::string> nodes_of(const std::string& id) {
    std::smatch m;
    const std::string show = slurm("scontrol show job " + id);
    static const std::regex node_list(R"((^|\s)NodeList=(\S+))");
    if (!std::regex_search(show, m, node_list) || m[2] == "(null)") {
      ADD_FAILURE() << "no NodeList for job " << id << ": " << show;
      return {};
    }
    std::vector<std::string> nodes;
    std::istringstream lines(slurm("scontrol show hostnames " + m[2].str()));
    for (std::string n; lines >> n;) nodes.push_back(n);
    return nodes;
  }
  // What the stage folder of job `id` holds on `node` (paths below it, sorted;
  // empty when it does not exist), read there: through the running job's own
  // allocation (--overlap) while it runs, else by a one-task job on that node.
  std::vector<std::string> stage_on(const std::string& node, const std::string& id, bool running) {
    const std::string stage = (node_local() / ("dlscale-" + id)).string();
    const std::string look = "sh -c " + shell_quote("if cd " + shell_quote(stage) + " 2>/dev/null; then find . | sort; fi");
    const std::string where = running ? " --jobid=" + id + " --overlap" : " --time=1";
    std::istringstream lines(slurm("srun -N1 -n1 -w " + node + where + " " + look));
    std::vector<std::string> paths;
    for (std::string p; std::getline(lines, p);)
      if (p != ".") paths.push_back(p.substr(2));
    return paths;
  }
  // Waits until Slurm has ended the job on every node (not COMPLETING: its
  // steps' processes are gone); its final state.
  std::string wait_until_ended(const std::string& id) {
    static const std::regex state(R"(JobState=(\S+))");
    std::smatch m;
    for (int i = 0; i < 480; ++i) {
      const std::string show = slurm("scontrol show job " + id);
      if (std::regex_search(show, m, state) && m[1] != "RUNNING" && m[1] != "PENDING" && m[1] != "COMPLETING" &&
          m[1] != "CONFIGURING")
        return m[1];
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
    }
    ADD_FAILURE() << "job " << id << " did not end";
    return "";
  }
  void expect_no_copy_left(const std::string& id, const std::string& folder) {
    const auto nodes = nodes_of(id);
    ASSERT_FALSE(nodes.empty());
    for (const auto& node : nodes)
      EXPECT_EQ(stage_on(node, id, false), std::vector<std::string>{})
          << "node " << node << " still holds the stage folder\n" << read_file(dir / "jobs" / folder / "log.txt");
  }
  std::size_t count(const std::string& text, const std::string& part) {
    std::size_t n = 0;
    for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
    return n;
  }
};

// One verified copy per dataset on each node (not one per rank, nor a partial
// one beside it) while the job runs; none once scancel has ended it.
TEST_F(SlurmStaging, EachNodeHoldsOneVerifiedCopyWhileTheJobRunsAndNoneAfterScancel) {
  std::string folder = submit("--name staged-cancel --tasks-per-node 2 -- --max-epochs 100000");
  const std::string id = record(folder)["slurm_job_id"];
  wait_for(folder, {"running"});
  for (int i = 0; i < 240 && !job(folder).contains("progress"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  ASSERT_TRUE(job(folder).contains("progress")) << read_file(dir / "jobs" / folder / "log.txt");
  const auto nodes = nodes_of(id);
  ASSERT_FALSE(nodes.empty());
  for (const auto& node : nodes) {
    const auto paths = stage_on(node, id, true);
    std::vector<std::string> indexes, markers, partial;
    for (const auto& p : paths) {
      if (p.size() > 11 && p.substr(p.size() - 11) == "/index.json") indexes.push_back(p);
      if (p.find(kStagedMarker) != std::string::npos) markers.push_back(p);
      if (p.find(".partial-") != std::string::npos) partial.push_back(p);
    }
    EXPECT_EQ(indexes, (std::vector<std::string>{"test-data/index.json", "train-data/index.json"})) << node;
    EXPECT_EQ(markers.size(), 2u) << node << ": a copy without its verification";
    EXPECT_TRUE(partial.empty()) << node;
  }
  const std::string log = read_file(dir / "jobs" / folder / "log.txt");
  EXPECT_EQ(count(log, "sizes and CRC-32s verified"), 2 * nodes.size()) << log;
  RunResult c = dlscale("cancel " + id);
  ASSERT_EQ(c.exit_code, 0) << c.err;
  EXPECT_EQ(wait_until_ended(id), "CANCELLED");
  expect_no_copy_left(id, folder);
}

TEST_F(SlurmStaging, NoCopyIsLeftAfterAJobThatEndsNormally) {
  std::string folder = submit("--name staged-done --tasks-per-node 2");
  const std::string id = record(folder)["slurm_job_id"];
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  EXPECT_EQ(j["state"], "done") << j.dump() << read_file(dir / "jobs" / folder / "log.txt");
  EXPECT_EQ(wait_until_ended(id), "COMPLETED");
  // The ranks trained on the copies (--staged-data: verified ones only).
  const std::string config = read_file(dir / "jobs" / folder / "run" / "config.ini");
  EXPECT_NE(config.find("train-data = " + (node_local() / ("dlscale-" + id)).string() + "/train-data\n"),
            std::string::npos)
      << config;
  const std::string log = read_file(dir / "jobs" / folder / "log.txt");
  const auto nodes = nodes_of(id);
  EXPECT_EQ(count(log, "sizes and CRC-32s verified"), 2 * nodes.size()) << log;
  EXPECT_EQ(count(log, "dlscale-" + id + " (Hangup)"), nodes.size()) << "one removal per node:\n" << log;
  EXPECT_EQ(log.find("CANCELLED"), std::string::npos) << "the keepers ended as a cancelled step:\n" << log;
  expect_no_copy_left(id, folder);
}

TEST_F(SlurmStaging, NoCopyIsLeftAfterARankFails) {
  setenv("DLSCALE_FAIL_AT", "1:5", 1);  // rank 1 throws at iteration 5; sbatch passes the environment on
  std::string folder = submit("--name staged-fail --tasks-per-node 2");
  unsetenv("DLSCALE_FAIL_AT");
  const std::string id = record(folder)["slurm_job_id"];
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  EXPECT_EQ(j["state"], "failed") << j.dump();
  EXPECT_NE(read_file(dir / "jobs" / folder / "log.txt").find("DLSCALE_FAIL_AT"), std::string::npos);
  EXPECT_EQ(wait_until_ended(id), "FAILED");
  expect_no_copy_left(id, folder);
}

// A damaged source shard: the stage fails on the node, naming the file, the
// job fails before any rank starts, and the partial copy goes with the rest.
TEST_F(SlurmStaging, DamagedSourceShardFailsTheJobAndLeavesNoCopy) {
  const std::string shard = (dir / "train" / "shard-00001.h5").string();
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    const auto middle = static_cast<std::streamoff>(fs::file_size(shard) / 2);
    char c = 0;
    f.seekg(middle).get(c);
    f.seekp(middle).put(static_cast<char>(c ^ 0x5a));
  }
  std::string folder = submit("--name staged-damaged --tasks-per-node 2");
  const std::string id = record(folder)["slurm_job_id"];
  auto j = wait_for(folder, {"done", "failed", "cancelled"});
  EXPECT_EQ(j["state"], "failed") << j.dump();
  const std::string log = read_file(dir / "jobs" / folder / "log.txt");
  EXPECT_NE(log.find(shard + ": the source file is damaged"), std::string::npos) << log;
  EXPECT_EQ(log.find("rank(s)"), std::string::npos) << "training started:\n" << log;
  EXPECT_EQ(wait_until_ended(id), "FAILED");
  expect_no_copy_left(id, folder);
}

// A preempted job requeues itself: Slurm ends the first start's steps (the
// keepers remove the copies), and the next start stages afresh, never onto
// what the first left.
TEST_F(SlurmStaging, RequeuedJobStagesAgainAndLeavesNoCopy) {
  std::string folder = submit("--name staged-requeue --tasks-per-node 2 -- --max-epochs 100000");
  const std::string id = record(folder)["slurm_job_id"];
  const fs::path log_file = dir / "jobs" / folder / "log.txt";
  wait_for(folder, {"running"});
  for (int i = 0; i < 240 && !job(folder).contains("progress"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  slurm("scancel --signal=USR1 " + id);  // what --signal=USR1@N sends: the ranks stop at a checkpoint
  // The second start is training once it has resumed from that checkpoint.
  for (int i = 0; i < 480 && read_file(log_file).find("resumed from") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  const std::string log = read_file(log_file);
  ASSERT_NE(log.find("started again after a requeue (restart 1)"), std::string::npos) << log;
  ASSERT_NE(log.find("resumed from"), std::string::npos) << log;
  const auto nodes = nodes_of(id);
  EXPECT_EQ(count(log, "sizes and CRC-32s verified"), 4 * nodes.size()) << "copied once per start:\n" << log;
  EXPECT_EQ(log.find("was staged already"), std::string::npos) << log;
  for (const auto& node : nodes) {
    std::size_t markers = 0;
    for (const auto& p : stage_on(node, id, true)) markers += p.find(kStagedMarker) != std::string::npos;
    EXPECT_EQ(markers, 2u) << node;
  }
  ASSERT_EQ(dlscale("cancel " + id).exit_code, 0);
  EXPECT_EQ(wait_until_ended(id), "CANCELLED");
  expect_no_copy_left(id, folder);
}

}  // namespace
}  // namespace dlscale::testing
