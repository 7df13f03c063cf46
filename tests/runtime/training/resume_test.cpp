// Checkpoint and resume under mpirun -n 2: a run stopped at a step boundary
// and resumed with --resume auto ends with bitwise the same weights as an
// uninterrupted run (same seed, rank count and threads), also with
// augmentation and for a transformer and a residual network in deterministic
// mode; a corrupt newest
// checkpoint is set aside; a different rank count resumes with a re-split and
// ends with the weights of an uninterrupted run; checkpoint-keep bounds the
// files kept and never deletes the checkpoint just written; a fresh run into a
// folder of checkpoints is refused; an explicit older checkpoint sets the
// newer ones aside; ranks that restore different contents are stopped.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>

#include "io/hdf5.h"
#include "io/sampler.h"
#include "io/shard_writer.h"
#include "io/text_tokens.h"
#include "network_weights.h"
#include "runtime/training/checkpoint.h"
#include "runtime/training/trainer.h"
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

// The run `make(NAME + "-whole")` uninterrupted, and `make(NAME + "-parts")`
// stopped after `stop_at` steps and resumed with --resume auto.
struct WholeAndResumed {
  TrainingResult whole, resumed;
};
WholeAndResumed whole_and_resumed(const std::function<TrainingOptions(const std::string&)>& make,
                                  const std::string& name, int stop_at, Communicator& comm) {
  WholeAndResumed r;
  r.whole = trainnet(make(name + "-whole"), comm);
  train_stopping_at(make(name + "-parts"), comm, stop_at);
  auto o = make(name + "-parts");
  o.resume = "auto";
  r.resumed = trainnet(o, comm);
  return r;
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
      // Byte windows of a text with structure to learn, for the transformer.
      std::string text;
      for (int i = 0; text.size() < 3000; ++i) text += "line " + std::to_string(i * 7 % 31) + ": to be or not\n";
      write_dataset((dir_ / "text").string(),
                    text_windows(std::vector<std::uint8_t>(text.begin(), text.end()), {12, 12}), 2, kByteVocabulary);
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
  EXPECT_TRUE(network_weights(*whole.network) == network_weights(*resumed.network))
      << "resumed weights differ from the whole run";
  EXPECT_EQ(*whole.validation_accuracy, *resumed.validation_accuracy);
  if (comm.rank() == 0) {  // and the files themselves: what `cmp` checks after a deterministic run
    EXPECT_TRUE(read_file(dir_ / "whole" / "model.h5") == read_file(dir_ / "parts" / "model.h5"))
        << "model.h5 of the resumed run differs in its bytes from the whole run's";
  }
}

// With random crops and flips on, a stopped and resumed run still ends with
// the uninterrupted run's weights: the resumed epoch draws the same
// augmentation (io/augment.h), and the augmentation did reach training.
TEST_F(Resume, AugmentedRunStoppedAndResumedEqualsUninterruptedBitwise) {
  Communicator comm;
  auto augmented = [&](const std::string& run) {
    auto o = options(dir_, run);
    o.augment.crop_padding = 2;
    o.augment.horizontal_flip = true;
    return o;
  };
  auto [whole, resumed] = whole_and_resumed(augmented, "aug", 37, comm);
  EXPECT_EQ(resumed.iterations, 90);
  EXPECT_TRUE(network_weights(*whole.network) == network_weights(*resumed.network))
      << "resumed weights differ from the whole run";
  TrainingResult plain = trainnet(options(dir_, "aug-plain"), comm);
  EXPECT_FALSE(network_weights(*whole.network) == network_weights(*plain.network)) << "augmentation changed nothing";
}

// Issue 18's check for transformers: a deterministic 2-rank run of a causal
// transformer block on a token dataset, stopped and resumed, ends with the
// uninterrupted run's weights and per-token validation loss.
TEST_F(Resume, DeterministicTransformerStoppedAndResumedEqualsUninterruptedBitwise) {
  Communicator comm;
  auto transformer = [&](const std::string& run) {
    auto o = options(dir_, run);
    o.train_data = o.validation_data = (dir_ / "text").string();
    o.network.input_shape = {12};
    o.network.layer_lines = {"embedding vocab=256 dim=16",   "posembedding name=b0",
                             "layernorm",                    "attention heads=2 causal=true",
                             "add from=b0 name=b0_attn",     "layernorm",
                             "dense units=32 per_position=true", "gelu",
                             "dense units=16 per_position=true", "add from=b0_attn",
                             "layernorm",                    "dense units=256 per_position=true",
                             "softmax"};
    o.deterministic = true;
    o.max_epochs = 2;
    return o;
  };
  auto [whole, resumed] = whole_and_resumed(transformer, "tf", 13, comm);
  ASSERT_GT(whole.iterations, 20);
  EXPECT_EQ(resumed.iterations, whole.iterations);
  EXPECT_TRUE(network_weights(*whole.network) == network_weights(*resumed.network))
      << "resumed weights differ from the whole run";
  EXPECT_EQ(*whole.validation_loss, *resumed.validation_loss);
  EXPECT_LT(*whole.validation_loss, std::log(256.0) - 1) << "the transformer learned nothing";
}

// The same for the residual family: a deterministic 2-rank run of a small
// ResNet (a residual block with a stride-2 projection shortcut, global
// average pooling) with augmentation, stopped and resumed, ends with the
// uninterrupted run's weights and validation accuracy.
TEST_F(Resume, DeterministicResidualNetworkStoppedAndResumedEqualsUninterruptedBitwise) {
  Communicator comm;
  auto resnet = [&](const std::string& run) {
    auto o = options(dir_, run);
    o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same bias=false", "batchnorm", "relu name=stem",
                             "conv2d filters=8 kernel=3 stride=2 padding=same bias=false", "batchnorm", "relu",
                             "conv2d filters=8 kernel=3 padding=same bias=false", "batchnorm name=main",
                             "conv2d filters=8 kernel=1 stride=2 bias=false input=stem", "batchnorm",
                             "add from=main", "relu", "globalavgpool", "dense units=4", "softmax"};
    o.augment.crop_padding = 1;
    o.augment.horizontal_flip = true;
    o.deterministic = true;
    return o;
  };
  auto [whole, resumed] = whole_and_resumed(resnet, "res", 41, comm);
  ASSERT_EQ(whole.iterations, 90);
  EXPECT_EQ(resumed.iterations, 90);
  EXPECT_TRUE(network_weights(*whole.network) == network_weights(*resumed.network))
      << "resumed weights differ from the whole run";
  EXPECT_EQ(*whole.validation_accuracy, *resumed.validation_accuracy);
  EXPECT_LT(*whole.validation_loss, std::log(4.0) - 0.2) << "the residual network learned nothing (4 classes)";
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
    EXPECT_NE(text.find("skipped, damaged"), std::string::npos) << text;
    EXPECT_NE(text.find("ckpt-14.h5 at iteration 14"), std::string::npos) << text;
    EXPECT_TRUE(fs::exists(dir_ / "corrupt" / "checkpoints" / "set-aside" / "ckpt-20.h5"))
        << "the damaged checkpoint is moved aside, not deleted";
  }
}

std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

// The review's case: resuming past damaged checkpoints newer than the next
// one this run writes, with checkpoint-keep = 1. Pruning by iteration over the
// whole folder deleted the new checkpoint and kept a damaged one.
TEST_F(Resume, KeepOneNeverDeletesTheCheckpointJustWritten) {
  Communicator comm;
  train_stopping_at(options(dir_, "keep-one"), comm, 27);  // checkpoints at 7, 14, 21 and the stop at 27
  const fs::path ckpt = dir_ / "keep-one" / "checkpoints";
  if (comm.rank() == 0)
    for (const char* name : {"ckpt-21.h5", "ckpt-27.h5"}) fs::resize_file(ckpt / name, fs::file_size(ckpt / name) / 3);
  comm.barrier();
  auto o = options(dir_, "keep-one");
  o.resume = "auto";
  o.checkpoint_keep = 1;
  TrainingResult stopped = train_stopping_at(o, comm, 23);  // from 14; writes 21, then the stop's 23
  EXPECT_EQ(stopped.iterations, 23);
  if (comm.rank() == 0) {
    EXPECT_EQ(names_in(ckpt), (std::vector<std::string>{"ckpt-23.h5", "set-aside"}));
    EXPECT_EQ(names_in(ckpt / "set-aside"), (std::vector<std::string>{"ckpt-21.h5", "ckpt-27.h5"}));
  }
  comm.barrier();
  TrainingResult finished = trainnet(o, comm);
  EXPECT_EQ(finished.iterations, 90);
}

TEST_F(Resume, FreshRunIntoAFolderWithCheckpointsIsRefusedUnlessOverwrite) {
  Communicator comm;
  train_stopping_at(options(dir_, "reuse"), comm, 10);  // ckpt-7 and ckpt-10
  try {
    trainnet(options(dir_, "reuse"), comm);
    ADD_FAILURE() << "a fresh run into a folder of checkpoints must be refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("holds 2 checkpoint(s) of an earlier run (newest ckpt-10.h5)"),
              std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--resume auto"), std::string::npos) << e.what();
  }
  const fs::path ckpt = dir_ / "reuse" / "checkpoints";
  if (comm.rank() == 0) EXPECT_EQ(names_in(ckpt), (std::vector<std::string>{"ckpt-10.h5", "ckpt-7.h5"}));
  comm.barrier();
  auto o = options(dir_, "reuse");
  o.overwrite = true;
  o.checkpoint_keep = 1;
  TrainingResult r = trainnet(o, comm);
  EXPECT_EQ(r.iterations, 90);
  if (comm.rank() == 0) {
    EXPECT_EQ(names_in(ckpt), (std::vector<std::string>{"ckpt-84.h5", "set-aside"}));
    EXPECT_EQ(names_in(ckpt / "set-aside"), (std::vector<std::string>{"ckpt-10.h5", "ckpt-7.h5"}));
  }
}

// The stored position (batch 15 of epoch 0) means another place in the data
// with another batch size, seed or shuffle. With mini-batch-size 32 an epoch
// has exactly 15 batches: that resume used to find no batch left and spin at
// 100 % CPU for ever. Each change is refused naming its option, and nothing
// of the stopped run is lost.
TEST_F(Resume, ResumeThatChangesWhatThePositionMeansIsRefused) {
  Communicator comm;
  train_stopping_at(options(dir_, "meaning"), comm, 15);  // ckpt-7, ckpt-14 and the stop's ckpt-15
  struct Change {
    const char* option;
    std::function<void(TrainingOptions&)> apply;
    const char* said;
  };
  const std::vector<Change> changes = {
      {"mini-batch-size", [](TrainingOptions& o) { o.mini_batch_size = 32; }, "mini-batch-size = 16, this run has mini-batch-size = 32"},
      {"seed", [](TrainingOptions& o) { o.seed = 4; }, "seed = 3, this run has seed = 4"},
      {"shuffle", [](TrainingOptions& o) { o.shuffle = ShuffleMode::once; }, "shuffle = every-epoch, this run has shuffle = once"}};
  for (const auto& c : changes) {
    SCOPED_TRACE(c.option);
    auto o = options(dir_, "meaning");
    o.resume = "auto";
    c.apply(o);
    try {
      trainnet(o, comm);
      ADD_FAILURE() << "a resume with another " << c.option << " must be refused";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(c.said), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("ckpt-15.h5"), std::string::npos) << e.what();
    }
  }
  const fs::path ckpt = dir_ / "meaning" / "checkpoints";
  if (comm.rank() == 0)
    EXPECT_EQ(names_in(ckpt), (std::vector<std::string>{"ckpt-14.h5", "ckpt-15.h5", "ckpt-7.h5"}));
  comm.barrier();
  auto o = options(dir_, "meaning");  // unchanged: it goes on to the end
  o.resume = "auto";
  EXPECT_EQ(trainnet(o, comm).iterations, 90);
}

TEST_F(Resume, ExplicitOlderCheckpointSetsTheNewerOnesAside) {
  Communicator comm;
  train_stopping_at(options(dir_, "branch"), comm, 20);  // 7, 14, 20
  const fs::path ckpt = dir_ / "branch" / "checkpoints";
  auto o = options(dir_, "branch");
  o.resume = (ckpt / "ckpt-7.h5").string();
  train_stopping_at(o, comm, 12);  // a new branch from 7, stopped at 12
  if (comm.rank() == 0) {
    EXPECT_EQ(names_in(ckpt), (std::vector<std::string>{"ckpt-12.h5", "ckpt-7.h5", "set-aside"}));
    EXPECT_EQ(names_in(ckpt / "set-aside"), (std::vector<std::string>{"ckpt-14.h5", "ckpt-20.h5"}));
  }
  comm.barrier();
  o.resume = "auto";
  TrainingResult r = trainnet(o, comm);
  EXPECT_EQ(r.iterations, 90);
  if (comm.rank() == 0) {
    std::string text = read_file(dir_ / "branch" / "log.txt");
    EXPECT_NE(text.find("ckpt-12.h5 at iteration 12"), std::string::npos) << "auto must continue the new branch";
  }
}

std::string attribute(const std::string& path, const char* name) {
  auto lock = hdf5_lock();
  H5Id file = open_h5_read(path);
  return read_string_attribute(file.get(), name, path);
}

// Each rank reads the checkpoint itself; should the filesystem serve ranks
// different contents, training would sum gradients of different weights.
TEST_F(Resume, RanksRestoringDifferentContentsAreStopped) {
  Communicator comm;
  train_stopping_at(options(dir_, "differ"), comm, 14);  // 7, 14
  const fs::path ckpt = dir_ / "differ" / "checkpoints";
  const std::string path = (ckpt / (comm.rank() == 0 ? "ckpt-14.h5" : "ckpt-7.h5")).string();
  auto o = options(dir_, "differ");
  const CheckpointIdentity id{attribute(path, "network_hash"), attribute(path, "config_hash"), o.mini_batch_size,
                              o.seed, shuffle_name(o.shuffle)};
  Network net(o.network, DType::f32, o.seed);
  auto optimizer = make_optimizer(o.solver);
  std::vector<std::string> notes;
  try {
    restore_checkpoint(path, net, *optimizer, id, comm, notes);
    ADD_FAILURE() << "ranks that restored different states must be stopped";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1 restored another state from"), std::string::npos) << e.what();
  }
}

// Resuming on another rank count continues the same global batches: the
// result equals an uninterrupted run up to the rounding of the sums. The
// network has no dropout (its streams restart on a re-split) and no batch norm
// (its statistics are per rank), and trains in float64, where that rounding
// stays below 1e-9 relative (see data_parallel_test.cpp).
TEST_F(Resume, OtherRankCountEndsWithTheWeightsOfAnUninterruptedRun) {
  Communicator world;
  auto plain = [&](const std::string& run) {
    auto o = options(dir_, run);
    o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same", "relu", "maxpool size=2",
                             "dense units=16", "relu", "dense units=4", "softmax"};
    o.training_precision = "double";
    return o;
  };
  auto single = world.split(world.rank() == 0);
  TrainingResult whole_two = trainnet(plain("plain-2"), world);
  std::vector<std::vector<double>> whole_one;
  if (single) whole_one = network_weights(*trainnet(plain("plain-1"), *single).network);
  // 2 → 1: two ranks stop at 30, one rank finishes.
  train_stopping_at(plain("two-to-one"), world, 30);
  // 1 → 2: one rank stops at 30, two ranks finish.
  if (single) train_stopping_at(plain("one-to-two"), *single, 30);
  world.barrier();
  auto resumed = [&](const std::string& run) {
    auto o = plain(run);
    o.resume = "auto";
    return o;
  };
  TrainingResult one_to_two = trainnet(resumed("one-to-two"), world);
  auto difference = [](const std::vector<std::vector<double>>& a, const std::vector<std::vector<double>>& b) {
    double worst = 0;
    for (std::size_t t = 0; t < a.size(); ++t)
      for (std::size_t i = 0; i < a[t].size(); ++i)
        worst = std::max(worst, std::abs(a[t][i] - b[t][i]) / std::max(1.0, std::abs(a[t][i])));
    return worst;
  };
  EXPECT_EQ(one_to_two.iterations, 90);
  EXPECT_LE(difference(network_weights(*whole_two.network), network_weights(*one_to_two.network)), 1e-9);
  if (single) {
    TrainingResult two_to_one = trainnet(resumed("two-to-one"), *single);
    EXPECT_EQ(two_to_one.iterations, 90);
    EXPECT_LE(difference(whole_one, network_weights(*two_to_one.network)), 1e-9);
    // The uninterrupted 1- and 2-rank runs agree as closely.
    EXPECT_LE(difference(whole_one, network_weights(*whole_two.network)), 1e-9);
  }
  world.barrier();
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
