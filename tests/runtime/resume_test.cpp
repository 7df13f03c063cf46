// Checkpoint and resume under mpirun -n 2: a run stopped at a step boundary
// and resumed with --resume auto ends with bitwise the same weights as an
// uninterrupted run (same seed, rank count and threads); a corrupt newest
// checkpoint is skipped; a different rank count resumes with a re-split;
// checkpoint-keep bounds the files kept.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>

#include "io/shard_writer.h"
#include "runtime/trainer.h"
#include "stop_at.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

TrainingOptions options(const fs::path& dir, const std::string& run) {
  TrainingOptions o;
  o.train_data = (dir / "train").string();
  o.validation_data = (dir / "train").string();
  o.network.input_shape = {1, 8, 8};
  o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same", "batchnorm", "relu", "maxpool size=2",
                           "dense units=16", "relu", "dropout rate=0.3", "dense units=4", "softmax"};
  o.solver.solver = "adam";
  o.schedule.initial_learn_rate = 0.01;
  o.schedule.schedule = "cosine";
  o.max_epochs = 3;
  o.mini_batch_size = 16;
  o.shuffle = ShuffleMode::every_epoch;
  o.validation_frequency = 10;
  o.verbose = false;
  o.seed = 3;
  o.threads = 1;
  o.checkpoint_frequency = 7;
  o.checkpoint_frequency_unit = "iteration";
  o.execution_environment = "parallel-cpu";
  o.config_text = "resume test";
  o.output = (dir / run).string();
  return o;
}

std::vector<std::vector<double>> weights(Network& net) {
  std::vector<std::vector<double>> all;
  for (auto& [name, t] : net.named_tensors()) {
    std::vector<double> v(t->numel());
    for (std::int64_t i = 0; i < t->numel(); ++i) v[i] = t->at(i);
    all.push_back(std::move(v));
  }
  return all;
}

class Resume : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    dir_ = scratch_root() / "resume";
    if (rank == 0) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      write_dataset((dir_ / "train").string(), separable_images(480, 4, 8), 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }
  static fs::path dir_;
};
fs::path Resume::dir_;

TEST_F(Resume, StoppedAndResumedEqualsUninterruptedBitwise) {
  Communicator comm;
  ASSERT_EQ(comm.size(), 2) << "run with mpirun -n 2";
  TrainingResult whole = trainnet(options(dir_, "whole"), comm);
  ASSERT_EQ(whole.iterations, 90);

  TrainingResult stopped = train_stopping_at(options(dir_, "parts"), comm, 37);
  EXPECT_EQ(stopped.stop_reason, "preempted");
  EXPECT_EQ(stopped.iterations, 37);
  EXPECT_FALSE(fs::exists(dir_ / "parts" / "model.h5"));
  auto o = options(dir_, "parts");
  o.resume = "auto";
  TrainingResult resumed = trainnet(o, comm);
  EXPECT_EQ(resumed.iterations, 90);
  EXPECT_EQ(resumed.stop_reason, "max epochs");
  EXPECT_TRUE(weights(*whole.network) == weights(*resumed.network)) << "resumed weights differ from the whole run";
  EXPECT_EQ(*whole.validation_accuracy, *resumed.validation_accuracy);
  if (comm.rank() == 0) {  // and the files themselves: what `cmp` checks after a deterministic run
    EXPECT_TRUE(read_file(dir_ / "whole" / "model.h5") == read_file(dir_ / "parts" / "model.h5"))
        << "model.h5 of the resumed run differs in its bytes from the whole run's";
  }
}

TEST_F(Resume, CorruptNewestCheckpointIsSkipped) {
  Communicator comm;
  train_stopping_at(options(dir_, "corrupt"), comm, 20);  // checkpoints at 7, 14 and the stop at 20
  if (comm.rank() == 0) {
    auto newest = dir_ / "corrupt" / "checkpoints" / "ckpt-20.h5";
    ASSERT_TRUE(fs::exists(newest));
    fs::resize_file(newest, fs::file_size(newest) / 3);
  }
  comm.barrier();
  auto o = options(dir_, "corrupt");
  o.resume = "auto";
  TrainingResult r = trainnet(o, comm);
  EXPECT_EQ(r.iterations, 90);
  if (comm.rank() == 0) {
    std::string text = read_file(dir_ / "corrupt" / "log.txt");
    EXPECT_NE(text.find("skipping checkpoint"), std::string::npos);
    EXPECT_NE(text.find("ckpt-14.h5 at iteration 14"), std::string::npos) << text;
  }
}

TEST_F(Resume, OtherRankCountResumesWithAResplit) {
  Communicator world;
  train_stopping_at(options(dir_, "resplit"), world, 30);
  world.barrier();
  // Each rank alone resumes its own copy of the 2-rank run.
  if (world.rank() == 0) fs::copy(dir_ / "resplit", dir_ / "resplit-1", fs::copy_options::recursive);
  world.barrier();
  auto single = world.split(world.rank() == 0);
  if (single) {
    auto o = options(dir_, "resplit-1");
    o.resume = "auto";
    TrainingResult r = trainnet(o, *single);
    EXPECT_EQ(r.iterations, 90);
    std::string text = read_file(dir_ / "resplit-1" / "log.txt");
    EXPECT_NE(text.find("resuming a 2-rank checkpoint on 1 ranks"), std::string::npos) << text;
  }
  world.barrier();
}

TEST_F(Resume, CheckpointKeepBoundsTheFiles) {
  Communicator comm;
  auto o = options(dir_, "keep");
  o.checkpoint_keep = 2;
  trainnet(o, comm);
  if (comm.rank() == 0) {
    std::vector<std::string> names;
    for (auto& e : fs::directory_iterator(dir_ / "keep" / "checkpoints")) names.push_back(e.path().filename());
    std::sort(names.begin(), names.end());
    // 90 iterations, every 7th checkpointed: 77 and 84 are the newest two.
    EXPECT_EQ(names, (std::vector<std::string>{"ckpt-77.h5", "ckpt-84.h5"}));
  }
}

}  // namespace
}  // namespace dlscale::testing
