// Training on the GPU end to end through trainnet (execution-environment=gpu):
// the device network, staging, solver and loss scaling together.
//  - Against the CPU: the same CNN (no dropout: its masks come from another
//    generator on the GPU), seed and batches for one epoch of 30 sgdm steps
//    end with the same weights within 1e-3 of the largest magnitude among
//    their layer's tensors. One step differs by GEMM/cuDNN rounding (~1e-6,
//    the layer tests' bound is 1e-4); 30 small steps (lr 0.01) add those differences up
//    without growing them much. A wrong gradient, a missed update or a stale
//    batch changes weights by 1e-2 or more.
//  - Deterministic mode: two runs with dropout and adam give bitwise equal
//    weights, and a run stopped by a signal and resumed equals both.
//  - automatic-mixed (fp16 and bf16 math in dense and conv2d): three epochs
//    reach the float32 run's test accuracy within 5 points (half-precision
//    rounding moves single steps by ~1e-3 relative, which changes where
//    training ends but not how well it separates 4 classes), return float32
//    weights, and two deterministic runs are bitwise equal. fp16 uses dynamic
//    loss scaling; bf16 none (auto). An fp16 run stopped by a signal and
//    resumed equals both: the loss scale travels in the checkpoint (peers'
//    users see loss spikes after a resume that forgot it).
//  - DLSCALE_GPU_REDUCE (one rank): nccl-x2 runs the device buckets and
//    NCCL with a pre-multiplied sum (x2). One sgdm step (no L2, zero
//    velocity) moves w by -lr*g, so that run's weights equal bitwise a plain
//    run's with twice the learning rate (doubling is exact in floating
//    point) and differ from a plain run's with the same: the buckets covered
//    every gradient, once, and NCCL summed them. host sends the gradients
//    through the host MPI buckets and back: 30 deterministic steps equal the
//    plain run bitwise.
//  - fp16 overflow: a loss scale of 2^32 sends the scaled loss gradient past
//    fp16's 65504, so the first steps overflow, are skipped and halve the
//    scale until the gradients fit; the run then trains as usual.
//  - The caching allocator against DLSCALE_ALLOCATOR=debug (released blocks
//    filled with NaN, never reused): deterministic runs in float32 and fp16
//    automatic-mixed are bitwise equal. A kernel reading a block after its
//    release, or the copy stream given a block the compute stream still
//    uses, makes them differ. The shapes are chosen so that the latter
//    would happen: with 15 samples of 1x8x8 a staging slot (15 x 260 bytes)
//    and the fp16 copy of the conv output (15 x 2 x 64 x 2 bytes) share the
//    4 KiB size class, and the conv releases that copy during forward,
//    before the next batch used to be staged into a freshly taken block.
// Every check of a measured value prints it with its bound ("measured: ...",
// measured.h), pass or fail, so one run yields the figures. On a machine
// without a GPU every test is skipped with the reason.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>

#include "gpu/measured.h"
#include "io/shard_writer.h"
#include "io/text_tokens.h"
#include "runtime/core/gpu.h"
#include "runtime/training/trainer.h"
#include "stop_at.h"
#include "synthetic_data.h"

namespace dlscale::testing {
namespace {

TrainingOptions options(const fs::path& dir, const std::string& run, const std::string& environment) {
  TrainingOptions o;
  o.train_data = (dir / "train").string();
  o.test_data = (dir / "train").string();
  o.network.input_shape = {1, 8, 8};
  o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same", "batchnorm", "relu", "maxpool size=2",
                           "dense units=16", "relu", "dense units=4", "softmax"};
  o.solver.solver = "sgdm";
  o.schedule.initial_learn_rate = 0.01;
  o.max_epochs = 1;
  o.mini_batch_size = 16;
  o.shuffle = ShuffleMode::every_epoch;
  o.verbose = false;
  o.seed = 5;
  o.threads = 1;
  o.execution_environment = environment;
  o.config_text = "gpu training test";
  o.output = (dir / run).string();
  return o;
}

TrainingOptions deterministic_options(const fs::path& dir, const std::string& run) {
  TrainingOptions o = options(dir, run, "gpu");
  o.network.layer_lines.insert(o.network.layer_lines.end() - 2, "dropout rate=0.3");
  o.solver.solver = "adam";
  o.max_epochs = 2;
  o.deterministic = true;
  o.checkpoint_frequency = 11;
  o.checkpoint_frequency_unit = "iteration";
  return o;
}

TrainingOptions mixed_options(const fs::path& dir, const std::string& run, const std::string& half_type) {
  TrainingOptions o = options(dir, run, "gpu");
  o.training_precision = "automatic-mixed";
  o.mixed_precision_type = half_type;
  o.max_epochs = 3;
  o.solver.solver = "adam";
  o.schedule.initial_learn_rate = 0.005;
  o.deterministic = true;
  return o;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::abs(t.at(i)));
  return m;
}

// The bytes in which two networks' tensors differ, in total; each tensor
// that differs prints its share and its largest |a - b| (NaN as inf).
std::int64_t differing_bytes(Network& a, Network& b, const std::string& what) {
  auto ta = a.named_tensors(), tb = b.named_tensors();
  EXPECT_EQ(ta.size(), tb.size()) << what;
  if (ta.size() != tb.size()) return -1;
  std::int64_t total = 0;
  for (std::size_t k = 0; k < ta.size(); ++k) {
    const Tensor &x = *ta[k].second, &y = *tb[k].second;
    EXPECT_EQ(x.bytes(), y.bytes()) << what << ": " << ta[k].first;
    if (x.bytes() != y.bytes()) return -1;
    const auto *px = static_cast<const unsigned char*>(x.raw()), *py = static_cast<const unsigned char*>(y.raw());
    std::int64_t bytes = 0;
    for (std::size_t i = 0; i < x.bytes(); ++i) bytes += px[i] != py[i];
    if (bytes == 0) continue;
    double worst = 0;
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const double d = std::abs(x.at(i) - y.at(i));
      if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
    }
    measured_info(what + ": " + ta[k].first + " bytes differing", static_cast<double>(bytes));
    measured_info(what + ": " + ta[k].first + " max |a-b|", worst);
    total += bytes;
  }
  return total;
}

void expect_bitwise_equal(Network& a, Network& b, const std::string& what) {
  EXPECT_TRUE(measured(what + ": bytes differing in all tensors", differing_bytes(a, b, what), equal_to(0)));
}

class TrainGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    const GpuInfo gpu = query_gpus();
    if (gpu.device_count == 0) GTEST_SKIP() << "no GPU present: " << gpu.reason;
    dir_ = scratch_dir("train_gpu");
    write_dataset((dir_ / "train").string(), separable_images(480, 4, 8), 2);
  }
  fs::path dir_;
};

// The layer a tensor name belongs to: "00_conv2d" of "00_conv2d/bias".
std::string layer_of(const std::string& tensor_name) { return tensor_name.substr(0, tensor_name.find('/')); }

// The elements [first, end) of a tensor that training leaves to rounding
// noise: the key third of an attention layer's qkv_bias. A key bias adds
// q·b_k to every score of a row, which softmax ignores, so its gradient is
// zero in exact arithmetic; Adam, which divides a step by the gradient's own
// size, then walks it by up to the learning rate per step on noise, and
// differently on each backend (the first GPU run measured 0.009 of the
// layer's scale there, 1e-7 on every other tensor).
std::pair<std::int64_t, std::int64_t> left_to_noise(const std::string& tensor_name, const Tensor& t) {
  if (tensor_name.ends_with("/qkv_bias")) return {t.numel() / 3, 2 * t.numel() / 3};
  return {0, 0};
}

// Every weight of the GPU run within float32 rounding of the CPU run's,
// relative to the largest value among its layer's tensors. Not relative to
// the tensor alone: a convolution's bias before batch norm has a gradient of
// zero in exact arithmetic, so both runs hold only rounding noise there (the
// first GPU run measured 1.5 relative to the CPU's noise).
void expect_weights_close(const TrainingResult& cpu, const TrainingResult& gpu) {
  auto tc = cpu.network->named_tensors(), tg = gpu.network->named_tensors();
  ASSERT_EQ(tc.size(), tg.size());
  std::map<std::string, double> layer_scale;
  for (const auto& [name, tensor] : tc)
    layer_scale[layer_of(name)] = std::max(layer_scale[layer_of(name)], max_abs(*tensor));
  for (std::size_t k = 0; k < tc.size(); ++k) {
    const Tensor &c = *tc[k].second, &g = *tg[k].second;
    const auto [noise_first, noise_end] = left_to_noise(tc[k].first, c);
    double worst = 0;
    for (std::int64_t i = 0; i < c.numel(); ++i) {
      if (i >= noise_first && i < noise_end) continue;
      const double d = std::abs(g.at(i) - c.at(i));
      if (!(d <= worst)) worst = d;  // a NaN stays the worst (std::max would drop it)
    }
    measured_info(tc[k].first + " max |value| on the CPU", max_abs(c));
    const double rel = worst / std::max(layer_scale[layer_of(tc[k].first)], 1e-30);
    EXPECT_TRUE(measured(tc[k].first + " max err against the CPU, relative to its layer's largest value", rel,
                         below(1e-3)));
  }
}

TEST_F(TrainGpu, OneEpochMatchesTheCpuWithinFloat32Rounding) {
  Communicator comm;
  TrainingResult cpu = trainnet(options(dir_, "cpu", "cpu"), comm);
  TrainingResult gpu = trainnet(options(dir_, "gpu", "gpu"), comm);
  ASSERT_EQ(gpu.iterations, 30);
  ASSERT_EQ(gpu.devices.size(), 1u);
  EXPECT_NE(gpu.devices[0].find("gpu"), std::string::npos) << gpu.devices[0];
  expect_weights_close(cpu, gpu);
  ASSERT_TRUE(cpu.test_accuracy && gpu.test_accuracy);
  EXPECT_TRUE(measured("test accuracy", *gpu.test_accuracy, near(*cpu.test_accuracy, 0.02)));
  EXPECT_TRUE(measured("final mini-batch loss", gpu.final_minibatch_loss,
                       near(cpu.final_minibatch_loss, 1e-3 * std::max(1.0, cpu.final_minibatch_loss))));
}

// A ResNet downsampling block (input= branch with a 1×1 stride-2 shortcut,
// add join, globalavgpool) with augmentation: DeviceNetwork routes the
// branch gradients as Network does.
TEST_F(TrainGpu, ProjectionShortcutNetworkMatchesTheCpu) {
  Communicator comm;
  auto resnet = [&](const std::string& run, const std::string& environment) {
    TrainingOptions o = options(dir_, run, environment);
    o.network.layer_lines = {"conv2d filters=4 kernel=3 padding=same bias=false", "batchnorm", "relu name=b_in",
                             "conv2d filters=8 kernel=3 stride=2 padding=same bias=false", "batchnorm", "relu",
                             "conv2d filters=8 kernel=3 padding=same bias=false", "batchnorm name=main",
                             "conv2d filters=8 kernel=1 stride=2 bias=false input=b_in", "batchnorm",
                             "add from=main", "relu", "globalavgpool", "dense units=4", "softmax"};
    o.augment.crop_padding = 1;
    o.augment.horizontal_flip = true;
    return o;
  };
  TrainingResult cpu = trainnet(resnet("resnet-cpu", "cpu"), comm);
  TrainingResult gpu = trainnet(resnet("resnet-gpu", "gpu"), comm);
  ASSERT_EQ(gpu.iterations, 30);
  expect_weights_close(cpu, gpu);
  EXPECT_NEAR(gpu.final_minibatch_loss, cpu.final_minibatch_loss, 1e-3 * std::max(1.0, cpu.final_minibatch_loss));
}

// A causal transformer block on byte windows (embedding, learned positions,
// layer norms, 2-head attention, a per-position MLP with GELU, residual
// joins, one softmax per position): one epoch on the GPU ends within float32
// rounding of the CPU's weights and per-token test loss, and learned; two
// deterministic GPU runs are bitwise equal.
TEST_F(TrainGpu, TransformerMatchesTheCpuAndIsDeterministic) {
  std::string text;
  for (int i = 0; text.size() < 4000; ++i) text += "line " + std::to_string(i * 7 % 31) + ": to be or not\n";
  write_dataset((dir_ / "text").string(),
                text_windows(std::vector<std::uint8_t>(text.begin(), text.end()), {12, 12}), 2, kByteVocabulary);
  Communicator comm;
  auto transformer = [&](const std::string& run, const std::string& environment) {
    TrainingOptions o = options(dir_, run, environment);
    o.train_data = o.test_data = (dir_ / "text").string();
    o.network.input_shape = {12};
    o.network.layer_lines = {"embedding vocab=256 dim=16",       "posembedding name=b0",
                             "layernorm",                        "attention heads=2 causal=true",
                             "add from=b0 name=b0_attn",         "layernorm",
                             "dense units=32 per_position=true", "gelu",
                             "dense units=16 per_position=true", "add from=b0_attn",
                             "layernorm",                        "dense units=256 per_position=true",
                             "softmax"};
    o.solver.solver = "adam";
    o.schedule.initial_learn_rate = 0.003;
    o.deterministic = true;
    return o;
  };
  TrainingResult cpu = trainnet(transformer("tf-cpu", "cpu"), comm);
  TrainingResult gpu = trainnet(transformer("tf-gpu", "gpu"), comm);
  ASSERT_EQ(gpu.iterations, cpu.iterations);
  ASSERT_GT(gpu.iterations, 15);
  expect_weights_close(cpu, gpu);
  ASSERT_TRUE(cpu.test_loss && gpu.test_loss);
  EXPECT_TRUE(measured("per-token test loss", *gpu.test_loss, near(*cpu.test_loss, 1e-3 * *cpu.test_loss)));
  EXPECT_TRUE(measured("per-token test loss against a uniform guess (log 256 - 1)", *gpu.test_loss,
                       below(std::log(256.0) - 1)));
  TrainingResult again = trainnet(transformer("tf-gpu-again", "gpu"), comm);
  expect_bitwise_equal(*gpu.network, *again.network, "two deterministic GPU runs");
}

TEST_F(TrainGpu, DeterministicRunsAndAResumedRunAreBitwiseEqual) {
  Communicator comm;
  TrainingResult first = trainnet(deterministic_options(dir_, "first"), comm);
  TrainingResult second = trainnet(deterministic_options(dir_, "second"), comm);
  ASSERT_EQ(first.iterations, 60);
  expect_bitwise_equal(*first.network, *second.network, "second run vs first");

  TrainingResult stopped = train_stopping_at(deterministic_options(dir_, "parts"), comm, 23);
  ASSERT_EQ(stopped.stop_reason, "preempted");
  TrainingOptions o = deterministic_options(dir_, "parts");
  o.resume = "auto";
  TrainingResult resumed = trainnet(o, comm);
  ASSERT_EQ(resumed.iterations, 60);
  expect_bitwise_equal(*first.network, *resumed.network, "resumed run vs first");
}

TrainingResult train_with_allocator(const TrainingOptions& o, Communicator& comm, const char* mode) {
  setenv("DLSCALE_ALLOCATOR", mode, 1);
  try {
    TrainingResult r = trainnet(o, comm);
    unsetenv("DLSCALE_ALLOCATOR");
    return r;
  } catch (...) {
    unsetenv("DLSCALE_ALLOCATOR");
    throw;
  }
}

TEST_F(TrainGpu, DebugAllocatorTrainsBitwiseLikeTheCachingAllocator) {
  Communicator comm;
  for (const std::string half_type : {"", "fp16"}) {
    MEASURED_SCOPE(half_type.empty() ? "float32" : half_type);
    auto make = [&](const std::string& run) {
      TrainingOptions o = half_type.empty() ? options(dir_, run, "gpu") : mixed_options(dir_, run, half_type);
      o.network.layer_lines.front() = "conv2d filters=2 kernel=3 padding=same";
      o.mini_batch_size = 15;
      o.max_epochs = 1;
      o.deterministic = true;
      return o;
    };
    const std::string tag = half_type.empty() ? "f32" : half_type;
    TrainingResult caching = train_with_allocator(make("alloc-caching-" + tag), comm, "caching");
    TrainingResult debug = train_with_allocator(make("alloc-debug-" + tag), comm, "debug");
    ASSERT_EQ(caching.iterations, 32);
    ASSERT_EQ(debug.iterations, 32);
    measured_info("final mini-batch loss, caching allocator", caching.final_minibatch_loss);
    measured_info("final mini-batch loss, debug allocator", debug.final_minibatch_loss);
    expect_bitwise_equal(*caching.network, *debug.network, "debug allocator vs caching");
  }
}

TEST_F(TrainGpu, LossScalingSkipsNoStepOfAHealthyRun) {
  Communicator comm;
  TrainingOptions o = options(dir_, "scaled", "gpu");
  o.loss_scale.mode = "dynamic";
  o.loss_scale.growth_interval = 10;
  o.deterministic = true;
  TrainingOptions p = options(dir_, "plain", "gpu");
  p.deterministic = true;
  TrainingResult scaled = trainnet(o, comm);
  TrainingResult plain = trainnet(p, comm);
  // Power-of-two scales change no bit of float32 gradients that stay in range.
  EXPECT_TRUE(measured("skipped steps", scaled.loss_scale.skipped_steps, equal_to(0)));
  EXPECT_TRUE(measured("loss scale at the end", scaled.loss_scale.scale, above(o.loss_scale.initial_scale)))
      << "the scale grows every growth-interval steps without overflow";
  expect_bitwise_equal(*scaled.network, *plain.network, "loss-scaled vs unscaled");
}

TEST_F(TrainGpu, AutomaticMixedReachesFloat32AccuracyInFp16AndBf16) {
  Communicator comm;
  TrainingOptions f32 = mixed_options(dir_, "mixed-f32", "fp16");
  f32.training_precision = "single";
  TrainingResult reference = trainnet(f32, comm);
  ASSERT_TRUE(reference.test_accuracy);
  for (const std::string half_type : {"fp16", "bf16"}) {
    MEASURED_SCOPE(half_type);
    TrainingResult first = trainnet(mixed_options(dir_, "mixed-" + half_type + "-1", half_type), comm);
    TrainingResult second = trainnet(mixed_options(dir_, "mixed-" + half_type + "-2", half_type), comm);
    ASSERT_EQ(first.iterations, 90);
    EXPECT_EQ(first.network->dtype(), DType::f32) << "the returned network has single-precision parameters";
    ASSERT_TRUE(first.test_accuracy);
    // The float32 figure is the bound's centre: "test accuracy = A (bound F +- 0.05)".
    EXPECT_TRUE(measured("test accuracy", *first.test_accuracy, near(*reference.test_accuracy, 0.05)));
    if (half_type == "fp16") {
      // cuDNN writes the conv weight gradient in fp16: at 2^16 its largest
      // entries (0.2-1.7 at the start, depending on the seed) may overflow
      // once or twice before the scale settles, never more than a few times.
      EXPECT_TRUE(measured("skipped steps", first.loss_scale.skipped_steps, at_most(3)));
      EXPECT_TRUE(measured("loss scale at the end", first.loss_scale.scale, at_least(8192)))
          << "fp16 trains with dynamic loss scaling";
    } else {
      EXPECT_TRUE(measured("skipped steps", first.loss_scale.skipped_steps, equal_to(0)));
      EXPECT_TRUE(measured("loss scale at the end", first.loss_scale.scale, equal_to(1)))
          << "bf16 needs no loss scaling";
    }
    expect_bitwise_equal(*first.network, *second.network, "second run vs first");
    // And the math was not float32's after all.
    EXPECT_TRUE(measured("bytes differing from float32 training in all tensors",
                         differing_bytes(*first.network, *reference.network, "vs float32 training"), above(0)))
        << "the same weights as float32 training";
    if (half_type != "fp16") continue;
    TrainingOptions parts = mixed_options(dir_, "mixed-fp16-parts", half_type);
    TrainingResult stopped = train_stopping_at(parts, comm, 23);
    ASSERT_EQ(stopped.stop_reason, "preempted");
    parts.resume = "auto";
    TrainingResult resumed = trainnet(parts, comm);
    ASSERT_EQ(resumed.iterations, 90);
    EXPECT_TRUE(measured("resumed run's loss scale at the end", resumed.loss_scale.scale,
                         equal_to(first.loss_scale.scale)));
    expect_bitwise_equal(*first.network, *resumed.network, "resumed run vs first");
  }
}

TEST_F(TrainGpu, Fp16OverflowSkipsStepsAndBacksOffTheScale) {
  Communicator comm;
  TrainingOptions o = mixed_options(dir_, "overflow", "fp16");
  o.loss_scale.initial_scale = std::ldexp(1.0, 32);
  TrainingResult r = trainnet(o, comm);
  EXPECT_EQ(r.iterations, 90);
  // What overflows first is the conv weight gradient, which cuDNN writes in
  // fp16: it fits under about 2^18 (the scaled loss gradient, cast to fp16
  // in the dense layers, under about 2^20). From 2^32 that is 14 or so
  // halvings, each a skipped step with the weights unchanged; 40 skips in a
  // row would stop the run.
  EXPECT_TRUE(measured("skipped steps", r.loss_scale.skipped_steps, both(at_least(10), below(40))));
  EXPECT_TRUE(measured("loss scale at the end", r.loss_scale.scale, at_most(std::ldexp(1.0, 21))));
  ASSERT_TRUE(r.test_accuracy);
  EXPECT_TRUE(measured("test accuracy", *r.test_accuracy, above(0.8))) << "the steps after the skips still train";
  const std::string text = read_file(dir_ / "overflow" / "log.txt");
  EXPECT_NE(text.find("iteration 1: gradients overflowed, step skipped"), std::string::npos) << text;
}

// Sets DLSCALE_GPU_REDUCE for one scope (the trainer reads it when a run starts).
struct ReduceHook {
  explicit ReduceHook(const char* value) { setenv("DLSCALE_GPU_REDUCE", value, 1); }
  ~ReduceHook() { unsetenv("DLSCALE_GPU_REDUCE"); }
};

TEST_F(TrainGpu, ForcedNcclWithOneRankDoublesTheGradients) {
  Communicator comm;
  auto one_step = [&](const std::string& run, double learn_rate) {
    TrainingOptions o = options(dir_, run, "gpu");
    o.mini_batch_size = 480;  // the whole set: one step
    o.solver.l2_regularization = 0;
    o.schedule.initial_learn_rate = learn_rate;
    o.deterministic = true;
    return o;
  };
  TrainingResult plain = trainnet(one_step("plain", 0.01), comm);
  TrainingResult plain_2lr = trainnet(one_step("plain-2lr", 0.02), comm);
  TrainingResult doubled = [&] {
    ReduceHook hook("nccl-x2");
    return trainnet(one_step("nccl-x2", 0.01), comm);
  }();
  ASSERT_EQ(doubled.iterations, 1);
  expect_bitwise_equal(*doubled.network, *plain_2lr.network, "nccl-x2 vs plain 2*lr");
  EXPECT_TRUE(measured("nccl-x2 vs plain lr: bytes differing in all tensors",
                       differing_bytes(*doubled.network, *plain.network, "nccl-x2 vs plain lr"), above(0)))
      << "the hook changed nothing: the device buckets or NCCL did not run";
}

TEST_F(TrainGpu, ForcedHostBucketsWithOneRankEqualThePlainRun) {
  Communicator comm;
  auto run = [&](const std::string& name) {
    TrainingOptions o = options(dir_, name, "gpu");
    o.deterministic = true;
    return o;
  };
  TrainingResult plain = trainnet(run("plain"), comm);
  TrainingResult host = [&] {
    ReduceHook hook("host");
    return trainnet(run("host"), comm);
  }();
  ASSERT_EQ(host.iterations, 30);
  expect_bitwise_equal(*host.network, *plain.network, "host buckets vs plain");
}

}  // namespace
}  // namespace dlscale::testing
