// Dynamic loss scaling under mpirun -n 2: the overflow decision is common to
// all ranks, skipped steps back the scale off and good ones grow it; a
// power-of-two scale without overflow changes no bit of the training; an
// overflowing start skips steps instead of stopping with a NaN loss; the scale
// state survives a checkpoint (bitwise resume).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "expect_error.h"
#include "io/shard_writer.h"
#include "runtime/training/loss_scaler.h"
#include "runtime/training/trainer.h"
#include "stop_at.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

Param param_with_grad(std::vector<float> grad) {
  Param p;
  const auto n = static_cast<std::int64_t>(grad.size());
  p.value = Tensor({n});
  p.grad = Tensor({n});
  for (std::int64_t i = 0; i < n; ++i) p.grad.data<float>()[i] = grad[i];
  return p;
}

TEST(LossScaler, FiniteGradientsAreUnscaledAndTheScaleGrowsAfterTheInterval) {
  Communicator comm;
  LossScaleOptions o;
  o.growth_interval = 3;
  LossScaleState s;
  s.scale = 1024;
  LossScaler scaler(o, s);
  Param p = param_with_grad({1024.0f, -512.0f, 3072.0f});
  std::vector<Param*> params{&p};
  EXPECT_TRUE(scaler.unscale_or_skip(params, true, 1, comm));
  EXPECT_EQ(p.grad.at(0), 1.0);
  EXPECT_EQ(p.grad.at(1), -0.5);
  EXPECT_EQ(p.grad.at(2), 3.0);
  EXPECT_EQ(s.scale, 1024);
  EXPECT_TRUE(scaler.unscale_or_skip(params, true, 2, comm));
  EXPECT_TRUE(scaler.unscale_or_skip(params, true, 3, comm));
  EXPECT_EQ(s.scale, 2048) << "three good steps with growth interval 3 double the scale";
  EXPECT_EQ(s.good_steps, 0);
  EXPECT_EQ(s.skipped_steps, 0);
}

TEST(LossScaler, AnOverflowOnOneRankSkipsTheStepOnEveryRank) {
  Communicator comm;
  ASSERT_EQ(comm.size(), 2) << "run with mpirun -n 2";
  LossScaleOptions o;
  LossScaleState s;
  s.scale = 65536;
  s.good_steps = 7;
  LossScaler scaler(o, s);
  // Gradients are summed by the all-reduce and so agree; the loss is local.
  Param p = param_with_grad({1.0f, 2.0f});
  std::vector<Param*> params{&p};
  EXPECT_FALSE(scaler.unscale_or_skip(params, comm.rank() == 0, 5, comm));
  EXPECT_EQ(s.scale, 32768);
  EXPECT_EQ(s.good_steps, 0);
  EXPECT_EQ(s.skipped_steps, 1);

  Param inf = param_with_grad({1.0f, std::numeric_limits<float>::infinity()});
  std::vector<Param*> with_inf{&inf};
  EXPECT_FALSE(scaler.unscale_or_skip(with_inf, true, 6, comm));
  EXPECT_EQ(s.scale, 16384);
  EXPECT_EQ(s.skipped_steps, 2);
  EXPECT_EQ(s.skips_in_a_row, 2);
}

TEST(LossScaler, TooManySkipsInARowStopWithTheIteration) {
  Communicator comm;
  LossScaleOptions o;
  o.max_skips_in_a_row = 3;
  LossScaleState s;
  s.scale = 8;
  LossScaler scaler(o, s);
  Param nan = param_with_grad({std::numeric_limits<float>::quiet_NaN()});
  std::vector<Param*> params{&nan};
  EXPECT_FALSE(scaler.unscale_or_skip(params, true, 10, comm));
  EXPECT_FALSE(scaler.unscale_or_skip(params, true, 11, comm));
  expect_error([&] { scaler.unscale_or_skip(params, true, 12, comm); }, "NaN or infinite in 3 steps in a row up to iteration 12");
}

TEST(LossScaler, OptionsAreValidated) {
  LossScaleOptions o;
  o.mode = "static";
  expect_error([&] { validate(o); }, "loss-scaling must be auto, none or dynamic");
  o = {};
  o.initial_scale = 0;
  expect_error([&] { validate(o); }, "initial-loss-scale");
  o = {};
  EXPECT_TRUE(loss_scaling_enabled(o, "fp16"));
  EXPECT_FALSE(loss_scaling_enabled(o, "bf16")) << "bf16 has float32's range";
  EXPECT_FALSE(loss_scaling_enabled(o, "")) << "float32 math needs no loss scaling";
  o.mode = "dynamic";
  EXPECT_TRUE(loss_scaling_enabled(o, ""));
  EXPECT_TRUE(loss_scaling_enabled(o, "bf16"));
  o.mode = "none";
  EXPECT_FALSE(loss_scaling_enabled(o, "fp16"));
  // What the trainer passes: the half type only under automatic-mixed.
  TrainingOptions t;
  t.mixed_precision_type = "fp16";
  EXPECT_EQ(t.half_type(), "") << "single precision";
  t.training_precision = "automatic-mixed";
  EXPECT_EQ(t.half_type(), "fp16");
}

// The same images as float32 pixel values 0..255, as a user who forgot to
// normalize would feed them: first-layer gradients are ~255x larger, so a
// scale near float32's largest value overflows them (what a scale of 65536
// does to float16 gradients).
RawDataset unnormalized(const RawDataset& u8) {
  RawDataset d = u8;
  d.sample_type = SampleType::f32;
  d.samples.resize(u8.samples.size() * sizeof(float));
  for (std::size_t i = 0; i < u8.samples.size(); ++i) {
    const float v = u8.samples[i];
    std::memcpy(d.samples.data() + i * sizeof(float), &v, sizeof v);
  }
  return d;
}

class LossScaledTraining : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    dir_ = scratch_root() / "loss_scaling";
    if (rank == 0) {
      fs::remove_all(dir_);
      fs::create_directories(dir_);
      write_dataset((dir_ / "train").string(), separable_images(480, 4, 11), 2);
      write_dataset((dir_ / "raw").string(), unnormalized(separable_images(480, 4, 11)), 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  static TrainingOptions options(const std::string& run, const std::string& mode, double initial_scale,
                                 const std::string& data = "train") {
    TrainingOptions o;
    o.train_data = (dir_ / data).string();
    o.validation_data = o.train_data;
    o.network.input_shape = {1, 8, 8};
    o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same", "batchnorm", "relu", "maxpool size=2",
                             "dense units=16", "relu", "dense units=4", "softmax"};
    o.solver.solver = "sgdm";
    o.schedule.initial_learn_rate = 0.05;
    if (data == "raw") {
      // Batch norm would make the first layer's gradient independent of the
      // input scale; without it 0..255 inputs make large gradients.
      o.network.layer_lines.erase(o.network.layer_lines.begin() + 1);
      o.schedule.initial_learn_rate = 0.0005;
    }
    o.max_epochs = 3;
    o.mini_batch_size = 16;
    o.shuffle = ShuffleMode::every_epoch;
    o.validation_frequency = 30;
    o.verbose = false;
    o.seed = 5;
    o.threads = 1;
    o.execution_environment = "parallel-cpu";
    o.loss_scale.mode = mode;
    o.loss_scale.initial_scale = initial_scale;
    o.config_text = "loss scaling test " + mode;
    o.output = (dir_ / run).string();
    return o;
  }

  static std::vector<double> flat_weights(Network& net) {
    std::vector<double> all;
    for (auto& [name, t] : net.named_tensors())
      for (std::int64_t i = 0; i < t->numel(); ++i) all.push_back(t->at(i));
    return all;
  }

  static fs::path dir_;
};
fs::path LossScaledTraining::dir_;

// Multiplying by 2^k and dividing again is exact in binary floating point, and
// every backward step is linear in the upstream gradient: without overflow or
// underflow, scaling changes no bit of the weights.
TEST_F(LossScaledTraining, PowerOfTwoScaleWithoutOverflowChangesNoBit) {
  Communicator comm;
  TrainingResult plain = trainnet(options("plain", "none", 1), comm);
  TrainingResult scaled = trainnet(options("scaled", "dynamic", 1024), comm);
  EXPECT_EQ(scaled.loss_scale.skipped_steps, 0);
  EXPECT_EQ(scaled.loss_scale.scale, 1024) << "90 steps are fewer than the growth interval";
  EXPECT_EQ(plain.loss_scale.scale, 1);
  EXPECT_TRUE(flat_weights(*plain.network) == flat_weights(*scaled.network));
}

// A scale near float32's largest value makes the summed weight gradients
// overflow: those steps are skipped and the scale halves until they fit,
// and training goes on instead of stopping with a NaN loss.
TEST_F(LossScaledTraining, OverflowingScaleSkipsStepsAndBacksOff) {
  Communicator comm;
  TrainingResult plain = trainnet(options("plain-raw", "none", 1, "raw"), comm);
  TrainingResult r = trainnet(options("overflow", "dynamic", 0x1p127, "raw"), comm);
  EXPECT_EQ(r.iterations, 90);
  EXPECT_EQ(r.stop_reason, "max epochs");
  EXPECT_GT(r.loss_scale.skipped_steps, 0);
  EXPECT_LT(r.loss_scale.scale, 0x1p127);
  for (double w : flat_weights(*r.network)) ASSERT_TRUE(std::isfinite(w));
  // Skipping a few early steps costs a little accuracy on this easy data, no more.
  EXPECT_GT(*r.validation_accuracy, *plain.validation_accuracy - 0.1);
  if (comm.rank() == 0) {
    std::ifstream log(dir_ / "overflow" / "log.txt");
    std::string text((std::istreambuf_iterator<char>(log)), {});
    EXPECT_NE(text.find("gradients overflowed, step skipped, loss scale lowered"), std::string::npos) << text;
  }
}

TEST_F(LossScaledTraining, ScaleStateSurvivesAStopAndResumeBitwise) {
  Communicator comm;
  auto o = options("whole-scaled", "dynamic", 0x1p127, "raw");
  o.loss_scale.growth_interval = 5;  // the scale changes several times before and after the stop
  o.checkpoint_frequency = 10;
  o.checkpoint_frequency_unit = "iteration";
  TrainingResult whole = trainnet(o, comm);

  auto parts = o;
  parts.output = (dir_ / "parts-scaled").string();
  TrainingResult stopped = train_stopping_at(parts, comm, 33);
  ASSERT_EQ(stopped.stop_reason, "preempted");
  parts.resume = "auto";
  TrainingResult resumed = trainnet(parts, comm);
  EXPECT_EQ(resumed.iterations, 90);
  EXPECT_EQ(resumed.loss_scale.scale, whole.loss_scale.scale);
  EXPECT_GT(whole.loss_scale.skipped_steps, 0);
  EXPECT_EQ(resumed.loss_scale.skipped_steps, whole.loss_scale.skipped_steps);
  EXPECT_TRUE(flat_weights(*whole.network) == flat_weights(*resumed.network));
  if (comm.rank() == 0) {
    // Same rank count and no dropout: the empty random streams must still
    // count as one per rank (no "resuming a 2-rank checkpoint on 2 ranks").
    std::ifstream log(dir_ / "parts-scaled" / "log.txt");
    std::string text((std::istreambuf_iterator<char>(log)), {});
    EXPECT_EQ(text.find("resuming a"), std::string::npos) << text;
  }
}

// A checkpoint written without loss scaling holds scale 1. A run resumed
// from it with dynamic scaling turned on starts at initial-loss-scale (it
// used to take the 1 and lose the point of scaling) and says so.
TEST_F(LossScaledTraining, ResumeThatTurnsScalingOnStartsAtTheInitialScale) {
  Communicator comm;
  auto plain = options("unscaled-then", "none", 1);
  plain.checkpoint_frequency = 10;
  plain.checkpoint_frequency_unit = "iteration";
  ASSERT_EQ(train_stopping_at(plain, comm, 33).stop_reason, "preempted");
  auto scaled = options("unscaled-then", "dynamic", 1024);
  scaled.checkpoint_frequency = 10;
  scaled.checkpoint_frequency_unit = "iteration";
  scaled.resume = "auto";
  TrainingResult resumed = trainnet(scaled, comm);
  EXPECT_EQ(resumed.iterations, 90);
  EXPECT_EQ(resumed.loss_scale.skipped_steps, 0);
  EXPECT_EQ(resumed.loss_scale.scale, 1024) << "57 steps are fewer than the growth interval";
  if (comm.rank() == 0)
    EXPECT_NE(read_file(dir_ / "unscaled-then" / "log.txt")
                  .find("was written without loss scaling: dynamic loss scaling starts at initial-loss-scale"),
              std::string::npos);
}

}  // namespace
}  // namespace dlscale::testing
