// dlscale stage: a dataset folder copied to node-local storage and verified
// (io/staging.h), and the keeper a Slurm job runs on every node to remove the
// node's copies when the job ends (slurm/job_script.cpp). Runs without MPI:
// it is one task per node, beside the training's MPI job.
#include <signal.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "io/staging.h"
#include "launch/commands.h"

namespace dlscale {

namespace {

const char* kStageUsage =
    "usage: dlscale stage SRC DEST   copy the dataset folder SRC to DEST, verified against SRC/index.json\n"
    "       dlscale stage --keep DIR  (job scripts) create DIR, print one line, remove DIR on TERM, INT or HUP\n";

// "JOB.STEP" of this Slurm step ("-" outside one): the job script signals it.
std::string slurm_step() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  return job && step ? std::string(job) + "." + step : "-";
}

// Waits for TERM, INT or HUP with those signals blocked, so that a second
// one (Slurm's TERM after the script's) cannot cut the removal short. USR1
// and USR2 are for the ranks (preemption): they must not end the keeper.
int keep(const std::string& dir) {
  sigset_t ending;
  sigemptyset(&ending);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&ending, sig);
  pthread_sigmask(SIG_BLOCK, &ending, nullptr);
  for (int sig : {SIGUSR1, SIGUSR2, SIGPIPE}) signal(sig, SIG_IGN);
  const std::string where = "dlscale: node " + this_host() + ": ";
  std::filesystem::create_directories(dir);
  std::cout << slurm_step() << " " << where << "stage folder " << dir << ", removed when the job ends" << std::endl;
  int sig = 0;
  sigwait(&ending, &sig);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) std::filesystem::remove_all(dir, ec);  // an entry that went while it was being read
  if (ec) {
    std::cerr << where << "error: cannot remove " << dir << ": " << ec.message() << std::endl;
    return 1;
  }
  std::cout << where << "removed " << dir << " (" << strsignal(sig) << ")" << std::endl;
  return 0;
}

}  // namespace

int stage_command(const Args& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kStageUsage;
    return 0;
  }
  if (args.size() == 2 && args[0] == "--keep") return keep(args[1]);
  if (args.size() != 2 || args[0].rfind("-", 0) == 0 || args[1].rfind("-", 0) == 0)
    throw UsageError(std::string("stage needs SRC DEST\n") + kStageUsage);
  const StageResult r = stage_dataset(args[0], args[1]);
  const std::string where = "dlscale: node " + this_host() + ": ";
  for (const auto& note : r.notes) std::cout << where << note << "\n";
  if (r.reused)
    std::cout << where << r.dest << " was staged already and verified again (" << r.shards << " shards)\n";
  else
    std::cout << where << "staged " << args[0] << " to " << r.dest << ": " << r.shards << " shards, "
              << (r.bytes + (1 << 20) - 1) / (1 << 20) << " MiB, sizes and CRC-32s verified\n";
  return 0;
}

}  // namespace dlscale
