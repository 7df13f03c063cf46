// dlscale: the command line. Dispatches to a subcommand, and is the one place
// that catches errors: it prints them once and makes sure a failing rank
// brings the whole job down instead of leaving the others hanging.
#include <mpi.h>
#ifdef __SANITIZE_ADDRESS__  // the address lane (docs/reliability.md, "Sanitizer lanes")
#include <sanitizer/lsan_interface.h>
#endif

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <map>
#include <string>
#include <thread>

#include "launch/commands.h"
#include "runtime/parallel/mpi_env.h"
#include "runtime/parallel/job_setup.h"

namespace {

const char* kUsage =
    "usage: dlscale <command> [options]\n"
    "\n"
    "commands:\n"
    "  train CONFIG [--option value ...]   train a network (options: dlscale train --help)\n"
    "  shard --images F --labels F --output DIR --shards N   convert idx, CSV or .npy data to HDF5 shards\n"
    "  predict --model RUN/model.h5 --data DIR [--output F]  classify a dataset with a trained model\n"
    "  generate --model RUN/model.h5 --prompt TEXT --tokens N   sample text from a byte-level language model\n"
    "  launch -n N -- train CONFIG ...      start N local ranks through mpirun\n"
    "  info                                 build, devices and the rank layout of this job\n"
    "  profiles                             the cluster profiles, and which is the default\n"
    "  submit CONFIG [--profile P] [-- train options]   run a training as a batch job\n"
    "  jobs [JOB ...]                       submitted jobs: state and progress\n"
    "  fetch JOB [--to DIR]                 a finished job's summary and outputs\n"
    "  cancel JOB                           cancel a queued or running job\n"
    "  sweep SWEEP.ini [--profile P]        one training per trial of a grid/random sweep, ranked\n"
    "  report RUN|SWEEP [--output F]        a self-contained report.html with the run's or sweep's plots\n"
    "  monitor RUN|JOB_FOLDER [--once]      each rank's device, utilization, memory and step time, live\n"
    "  stage SRC DEST                       copy a dataset folder to node-local storage, verified\n";

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

// Any error on any rank ends the whole job with that rank's message. A rank
// cannot know whether the others hit the same error or wait for it in a
// collective (a config file missing on one node, say), and MPI_Finalize would
// then block for ever: with more than one rank, only MPI_Abort is safe. Rank 0
// reports at once; other ranks wait a moment first, so that an error every
// rank hits (a bad option) is printed once, by rank 0, whose abort ends them.
// Returns the exit code only for a one-rank job.
int end_job_with_error(const std::string& message, int code) {
  if (world_size() == 1) {
    std::cerr << "dlscale: error: " << message << std::endl;
    return code;
  }
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  if (world_rank() != 0) std::this_thread::sleep_for(std::chrono::seconds(2));
  // One write, so that the line arrives whole between mpirun's own messages.
  const std::string line = "dlscale: rank " + std::to_string(world_rank()) + " (" + host + "): error: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  return code;  // not reached: MPI_Abort ends this process
}

int run(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    if (world_rank() == 0) std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  using Command = int (*)(const dlscale::Args&, dlscale::Communicator&);
  const std::map<std::string, Command> commands = {{"train", dlscale::train_command},
                                                   {"shard", dlscale::shard_command},
                                                   {"predict", dlscale::predict_command},
                                                   {"generate", dlscale::generate_command},
                                                   {"info", dlscale::info_command},
                                                   {"profiles", dlscale::profiles_command},
                                                   {"submit", dlscale::submit_command},
                                                   {"jobs", dlscale::jobs_command},
                                                   {"fetch", dlscale::fetch_command},
                                                   {"cancel", dlscale::cancel_command},
                                                   {"sweep", dlscale::sweep_command},
                                                   {"report", dlscale::report_command}};
  auto it = commands.find(argv[1]);
  if (it == commands.end())
    throw dlscale::UsageError(std::string("unknown command '") + argv[1] + "'\n" + kUsage);
  dlscale::Args args(argv + 2, argv + argc);
  // Tasks that each started their own MPI job all act as rank 0: shard, info
  // and train would do (and write) everything once per task.
  dlscale::refuse_split_launch();
  dlscale::Communicator comm(MPI_COMM_WORLD);
  return it->second(args, comm);
}

}  // namespace

// How long OpenMP threads spin after a parallel loop before they sleep.
// Every CPU kernel runs on OpenMP's one pool (OpenBLAS included, see
// runtime/core/blas.cpp), so a short spin costs no other thread its core,
// while sleeping at once made each of a step's hundreds of loops pay a futex
// wake-up (ResNet training 10 % slower, MLP 25 %). 30000 spins are about
// 0.3 ms; libgomp cuts them to 100 when a process has more threads than
// CPUs. libgomp reads its settings only when it loads, so the binary
// re-executes itself once with them unless the user chose either.
static void set_openmp_waiting(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  setenv("GOMP_SPINCOUNT", "30000", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run as is
}

int main(int argc, char** argv) {
  if (argc > 1 && !std::strcmp(argv[1], "launch")) {
    try {
      return dlscale::launch_command(dlscale::Args(argv + 2, argv + argc));
    } catch (const std::exception& e) {
      std::cerr << "dlscale: error: " << e.what() << std::endl;
      return 2;
    }
  }
  // monitor only reads files: no MPI, so it runs on a login node or beside a job;
  // stage runs as one task per node beside the training's MPI job.
  if (argc > 1 && (!std::strcmp(argv[1], "monitor") || !std::strcmp(argv[1], "stage"))) {
    const dlscale::Args args(argv + 2, argv + argc);
    try {
      return argv[1][0] == 'm' ? dlscale::monitor_command(args) : dlscale::stage_command(args);
    } catch (const dlscale::UsageError& e) {
      std::cerr << "dlscale: error: " << e.what() << std::endl;
      return 2;
    } catch (const std::exception& e) {
      std::cerr << "dlscale: error: " << e.what() << std::endl;
      return 1;
    }
  }
  set_openmp_waiting(argv);
  dlscale::choose_mpi_defaults();
  dlscale::warn_about_pmix_fence();
  // Threads exist (the loader's, the watchdog's, the heartbeat's, OpenMP's);
  // only the main thread calls MPI, which FUNNELED says.
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const dlscale::UsageError& e) {
    code = end_job_with_error(e.what(), 2);
  } catch (const std::exception& e) {
    code = end_job_with_error(e.what(), 1);
  }
#ifdef __SANITIZE_ADDRESS__
  // Leaks are looked for before MPI_Finalize: Open MPI unloads its
  // components there, and their allocations then carry "<unknown module>"
  // frames that tests/sanitizers/lsan.supp cannot match by library name.
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
  return code;
}
