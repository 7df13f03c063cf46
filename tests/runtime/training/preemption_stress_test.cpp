// Preemption signals at random points (issue 32, docs/reliability.md
// "Preemption stress"): SIGUSR1 or SIGTERM reaches one random rank at a
// random moment of a deterministic Adam training that writes a checkpoint at
// every iteration, so it lands in start-up, restore, steps and checkpoint
// writes alike. Every stopped run must have left a checkpoint that the next
// run resumes with resume = auto; every chain of stops and resumes must end
// with the weights of the uninterrupted run, bit for bit; and nothing may
// crash. Runs in this process (one trainnet after another), so hundreds of
// points fit in CI's time: under mpirun -n 2 and -n 3, in the address lane,
// and in the ordinary build under glibc's malloc checks
// (GLIBC_TUNABLES=glibc.malloc.check=3, MALLOC_PERTURB_) for realistic
// timing (tests/runtime/CMakeLists.txt).
//   DLSCALE_STRESS_POINTS: signals to deliver (default 250 per rank count)
//   DLSCALE_STRESS_SEED:   the draw of ranks, signals and moments (default 1)
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "io/shard_writer.h"
#include "network_weights.h"
#include "runtime/training/preemption.h"
#include "runtime/training/trainer.h"
#include "stop_at.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

using Clock = std::chrono::steady_clock;

long env_or(const char* name, long fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atol(v) : fallback;
}

TrainingOptions stressed_run(const fs::path& dir, const std::string& run) {
  TrainingOptions o;
  o.train_data = (dir / "train").string();
  o.network.input_shape = {1, 8, 8};
  o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same", "batchnorm", "relu", "maxpool size=2",
                           "dense units=16", "relu", "dropout rate=0.2", "dense units=4", "softmax"};
  o.solver.solver = "adam";
  o.schedule.initial_learn_rate = 0.01;
  o.max_epochs = 40;  // 4 iterations per epoch: 160 iterations
  o.mini_batch_size = 24;
  o.shuffle = ShuffleMode::every_epoch;
  o.verbose = false;
  o.seed = 9;
  o.threads = 1;
  o.deterministic = true;
  o.checkpoint_frequency = 1;
  o.checkpoint_frequency_unit = "iteration";
  o.checkpoint_keep = 2;
  o.collective_timeout_s = 60;
  o.execution_environment = "parallel-cpu";
  o.config_text = "preemption stress";
  o.output = (dir / run).string();
  return o;
}

// Sends `signal` to this process `delay` after it is armed, unless the run
// it was armed for ended first. The kernel runs the handler on any thread.
class DelayedSignal {
 public:
  DelayedSignal(int signal, std::chrono::microseconds delay)
      : thread_([this, signal, delay] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (!ended_cv_.wait_for(lock, delay, [this] { return ended_; })) {
            sent_ = true;
            kill(getpid(), signal);
          }
        }) {}
  // The run returned: no signal after this. Returns whether one was sent.
  bool end() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ended_ = true;
    }
    ended_cv_.notify_one();
    thread_.join();
    return sent_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable ended_cv_;
  bool ended_ = false, sent_ = false;
  std::thread thread_;
};

TEST(PreemptionStress, SignalsAtRandomPointsNeverLoseACheckpointOrChangeABit) {
  Communicator comm;
  const fs::path dir = scratch_root() / "preemption_stress";
  if (comm.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    write_dataset((dir / "train").string(), separable_images(96, 4, 3), 3);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  install_preemption_handlers();
  clear_preemption_request();

  // The reference, and what a run costs: its start-up (one iteration run)
  // and its steps with their checkpoint writes, to spread the moments over.
  const auto t0 = Clock::now();
  ASSERT_EQ(train_stopping_at(stressed_run(dir, "one-iteration"), comm, 1).stop_reason, "preempted");
  const double startup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  const auto t1 = Clock::now();
  TrainingResult whole = trainnet(stressed_run(dir, "whole"), comm);
  const double run_s = std::chrono::duration<double>(Clock::now() - t1).count();
  auto unsaved = stressed_run(dir, "whole-without-checkpoints");
  unsaved.checkpoint_frequency = 0;
  const auto t2 = Clock::now();
  trainnet(unsaved, comm);
  const double unsaved_s = std::chrono::duration<double>(Clock::now() - t2).count();
  ASSERT_EQ(whole.stop_reason, "max epochs");
  const double step_s = run_s / static_cast<double>(whole.iterations);
  // Moments from 0 to start-up plus four steps: most runs stop within a few
  // iterations, and each chain still ends.
  const double horizon_s = comm.allreduce_max(startup_s + 4 * step_s);
  const auto reference = network_weights(*whole.network);

  const long target = env_or("DLSCALE_STRESS_POINTS", 250);
  std::mt19937_64 draw(static_cast<std::uint64_t>(env_or("DLSCALE_STRESS_SEED", 1)));  // the same on every rank
  long points = 0, chains = 0, attempts = 0, finished_with_signal = 0;
  while (points < target) {
    const std::string run = "chain-" + std::to_string(chains++);
    for (bool done = false; !done;) {
      ASSERT_LT(++attempts, 4 * target) << "the chains do not end: runs make no progress between signals";
      const int rank = static_cast<int>(draw() % comm.size());
      const int signal = draw() % 2 ? SIGUSR1 : SIGTERM;
      const auto delay = std::chrono::microseconds(static_cast<long>(
          std::uniform_real_distribution<double>(0, horizon_s)(draw) * 1e6));
      auto o = stressed_run(dir, run);
      o.resume = fs::exists(fs::path(o.output) / "checkpoints") ? "auto" : "";
      std::optional<DelayedSignal> sender;
      if (comm.rank() == rank) sender.emplace(signal, delay);
      TrainingResult r = trainnet(o, comm);
      const bool sent = sender && sender->end();
      clear_preemption_request();  // a signal after the last step boundary belongs to no run
      const bool signalled = comm.allreduce_max(sent ? 1.0 : 0.0) > 0;  // on whichever rank drew it
      points += signalled;
      if (r.stop_reason == "preempted") {
        ASSERT_FALSE(r.last_checkpoint.empty()) << run << ": stopped without a checkpoint";
        ASSERT_TRUE(fs::exists(r.last_checkpoint)) << r.last_checkpoint;
        continue;
      }
      ASSERT_EQ(r.stop_reason, "max epochs") << run;
      ASSERT_EQ(r.iterations, whole.iterations) << run;
      EXPECT_TRUE(network_weights(*r.network) == reference)
          << run << " ended with other weights than the uninterrupted run";
      finished_with_signal += signalled;
      done = true;
    }
  }
  if (comm.rank() == 0)
    std::cout << "measured: " << points << " signals on " << comm.size() << " ranks in " << chains << " chains ("
              << attempts << " runs, " << finished_with_signal << " signals after a chain's last step boundary); "
              << "start-up " << startup_s << " s, a step " << step_s * 1e3 << " ms, of which checkpoint writing "
              << (run_s - unsaved_s) / run_s * 100 << " %\n";
}

}  // namespace
}  // namespace dlscale::testing
