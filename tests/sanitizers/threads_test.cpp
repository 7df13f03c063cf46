// The threaded parts of a training run together, for the thread lane
// (tests/sanitizers/lane.sh thread; docs/reliability.md, "Sanitizer lanes"):
// a preemption signal handled on a thread other than the one that reads the
// flag, the collective watchdog's thread polling while the main thread marks
// waits, and a 2-rank training with the prefetch thread, OpenMP threads,
// overlapped gradient-bucket all-reduces, telemetry, checkpoints and a
// SIGUSR1 that arrives on a helper thread. In an ordinary build these check
// behaviour; under ThreadSanitizer any unsynchronized access between those
// threads fails them.
#include <gtest/gtest.h>
#include <mpi.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

#include "runtime/parallel/communicator.h"
#include "runtime/parallel/watchdog.h"
#include "runtime/training/preemption.h"
#include "runtime/training/trainer.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

using namespace std::chrono_literals;

// Spins until the flag is seen, at most `limit`: no join, no lock, nothing
// that would order the handler's write before this read except the flag.
bool seen_within(std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!preemption_requested())
    if (std::chrono::steady_clock::now() > end) return false;
  return true;
}

// srun's and the batch system's signals reach the process, and the kernel
// runs the handler on any thread that does not block them: the loader's,
// the watchdog's, an OpenMP worker, Open MPI's own. raise() on a helper
// thread makes that happen every time.
TEST(Threads, PreemptionSignalHandledOnAnotherThreadReachesTheMainThread) {
  install_preemption_handlers();
  for (int signal : {SIGUSR1, SIGTERM}) {
    clear_preemption_request();
    std::thread sender([signal] { std::raise(signal); });
    EXPECT_TRUE(seen_within(10s)) << "signal " << signal;
    sender.join();
  }
  clear_preemption_request();
}

// The main thread marks waits (what, since, limit) and context while the
// watchdog thread reads them every period; no wait here comes near the
// limit, so the watchdog never fires.
TEST(Threads, WatchdogPollsWhileWaitsAreMarked) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  CollectiveWatchdog dog(2.0, rank);  // polled every 0.5 s
  const auto end = std::chrono::steady_clock::now() + 1200ms;
  for (int i = 0; std::chrono::steady_clock::now() < end; ++i) {
    dog.set_context("iteration " + std::to_string(i));
    WatchedWait wait(&dog, i % 2 ? "MPI_Allreduce" : "MPI_Bcast", i % 3 ? 0 : 5.0, "test-limit");
    std::this_thread::sleep_for(1ms);
  }
}

TrainingOptions threaded_run(const fs::path& dir) {
  TrainingOptions o;
  o.train_data = (dir / "train").string();
  o.validation_data = (dir / "train").string();
  o.network.input_shape = {1, 8, 8};
  o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same", "relu", "maxpool size=2", "dense units=16",
                           "relu", "dense units=4", "softmax"};
  o.solver.solver = "adam";
  o.schedule.initial_learn_rate = 0.01;
  o.max_epochs = 10000;  // ended by the signal, never by its epochs
  o.mini_batch_size = 16;
  o.shuffle = ShuffleMode::every_epoch;
  o.validation_frequency = 5;
  o.verbose = false;
  o.seed = 5;
  o.threads = 2;                    // OpenMP workers in every layer
  o.gradient_bucket_mib = 0.001;    // several buckets, all-reduced while backward goes on
  o.collective_timeout_s = 60;      // the watchdog thread runs
  o.checkpoint_frequency = 3;
  o.checkpoint_frequency_unit = "iteration";  // rank 0 writes while the loader reads
  o.execution_environment = "parallel-cpu";
  o.config_text = "threads test";
  o.output = (dir / "run").string();  // telemetry.jsonl, the progress log
  return o;
}

TEST(Threads, TrainingStopsOnASignalThatArrivesOnAHelperThread) {
  Communicator comm;
  ASSERT_EQ(comm.size(), 2) << "run with mpirun -n 2";
  const fs::path dir = scratch_root() / "threads";
  if (comm.rank() == 0) {
    fs::create_directories(dir);
    write_dataset((dir / "train").string(), separable_images(160, 4, 2), 2);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  install_preemption_handlers();
  clear_preemption_request();
  // Rank 1 only: every rank learns of it through the step's flag all-reduce.
  std::atomic<bool> done{false};
  std::thread sender([&] {
    if (comm.rank() != 1) return;
    const auto end = std::chrono::steady_clock::now() + 1500ms;
    while (!done.load() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(10ms);
    if (!done.load()) std::raise(SIGUSR1);
  });
  TrainingResult r = trainnet(threaded_run(dir), comm);
  done.store(true);
  sender.join();
  clear_preemption_request();
  EXPECT_EQ(r.stop_reason, "preempted");
  EXPECT_GT(r.iterations, 0);
  EXPECT_FALSE(r.last_checkpoint.empty());
  if (comm.rank() == 0) EXPECT_TRUE(fs::exists(dir / "run" / "telemetry.jsonl"));
}

}  // namespace
}  // namespace dlscale::testing
