// model.h5 and checkpoint files: round trip, and a write that fails because
// the disk is full (RLIMIT_FSIZE in a child process) leaves the previous file
// intact and no temporary file behind.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <thread>

#include "io/io_test_util.h"
#include "io/model_file.h"

namespace dlscale {
namespace {

namespace fs = std::filesystem;

NetworkSpec spec() {
  NetworkSpec s;
  s.input_shape = {1, 6, 6};
  s.layer_lines = {"conv2d filters=4 kernel=3", "batchnorm", "relu", "dense units=300", "dense units=3", "softmax"};
  return s;
}

TEST(ModelFile, RoundTripsEveryTensor) {
  test::TempDir tmp;
  const fs::path& dir = tmp.path();
  Network net(spec(), DType::f64, 7);
  save_model((dir / "model.h5").string(), net);
  auto loaded = load_model((dir / "model.h5").string());
  EXPECT_EQ(loaded->dtype(), DType::f64);
  EXPECT_EQ(loaded->spec().layer_lines, spec().layer_lines);
  auto a = net.named_tensors(), b = loaded->named_tensors();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::int64_t j = 0; j < a[i].second->numel(); ++j) ASSERT_EQ(a[i].second->at(j), b[i].second->at(j));
  EXPECT_FALSE(fs::exists(dir / "model.h5.tmp"));
}

// A ResNet downsampling block (input= branch, 1×1 stride-2 shortcut, add,
// globalavgpool) comes back as the same graph, giving the same predictions.
TEST(ModelFile, RoundTripsAProjectionShortcutNetwork) {
  test::TempDir tmp;
  NetworkSpec s;
  s.input_shape = {2, 6, 6};
  s.layer_lines = {"conv2d filters=3 kernel=3 padding=same name=b_in",
                   "conv2d filters=4 kernel=3 stride=2 padding=same",
                   "batchnorm name=main",
                   "conv2d filters=4 kernel=1 stride=2 bias=false input=b_in",
                   "batchnorm",
                   "add from=main",
                   "relu",
                   "globalavgpool",
                   "dense units=3",
                   "softmax"};
  Network net(s, DType::f64, 7);
  Rng rng(3);
  Tensor x({2, 2, 6, 6}, DType::f64);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, rng.normal());
  net.forward_logits(x, true);  // batch statistics move the running statistics away from their start
  save_model((tmp.path() / "model.h5").string(), net);
  auto loaded = load_model((tmp.path() / "model.h5").string());
  ASSERT_EQ(loaded->nodes().size(), net.nodes().size());
  EXPECT_EQ(loaded->nodes()[3].input, 0);
  EXPECT_EQ(loaded->nodes()[5].add_from, 2);
  EXPECT_EQ(loaded->named_tensors()[8].first, "03_conv2d/weight");
  EXPECT_EQ(loaded->named_tensors()[8].second->shape(), Shape({4, 3, 1, 1}));
  Tensor a = net.predict(x), b = loaded->predict(x);
  for (std::int64_t i = 0; i < a.numel(); ++i) EXPECT_EQ(a.at(i), b.at(i)) << i;
}

// A transformer block comes back with its dataset names and layouts as
// docs/data-format.md lists them, predicting the same per-position
// probabilities (a model trained by hand would differ if any tensor were
// lost or transposed: every one is randomized first).
TEST(ModelFile, RoundTripsATransformerBlock) {
  test::TempDir tmp;
  NetworkSpec s;
  s.input_shape = {5};
  s.layer_lines = {"embedding vocab=256 dim=8",
                   "posembedding name=b0",
                   "layernorm",
                   "attention heads=2 causal=true",
                   "add from=b0 name=b0_attn",
                   "layernorm",
                   "dense units=16 per_position=true",
                   "gelu",
                   "dense units=8 per_position=true",
                   "add from=b0_attn",
                   "layernorm",
                   "dense units=256 per_position=true",
                   "softmax"};
  Network net(s, DType::f32, 7);
  Rng rng(3);
  for (auto& [name, t] : net.named_tensors())
    for (std::int64_t i = 0; i < t->numel(); ++i) t->set(i, rng.normal(0.0, 0.3));
  save_model((tmp.path() / "model.h5").string(), net);
  auto loaded = load_model((tmp.path() / "model.h5").string());
  std::vector<std::pair<std::string, Shape>> want = {
      {"00_embedding/weight", {256, 8}},   {"01_posembedding/weight", {5, 8}}, {"02_layernorm/scale", {8}},
      {"02_layernorm/offset", {8}},        {"03_attention/qkv_weight", {24, 8}}, {"03_attention/qkv_bias", {24}},
      {"03_attention/out_weight", {8, 8}}, {"03_attention/out_bias", {8}},       {"05_layernorm/scale", {8}},
      {"05_layernorm/offset", {8}},        {"06_dense/weight", {16, 8}},         {"06_dense/bias", {16}}};
  auto tensors = loaded->named_tensors();
  ASSERT_GE(tensors.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(tensors[i].first, want[i].first);
    EXPECT_EQ(tensors[i].second->shape(), want[i].second) << want[i].first;
  }
  EXPECT_EQ(loaded->positions(), 5);
  Tensor x({2, 5}, DType::f32);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(rng.below(256)));
  Tensor a = net.predict(x), b = loaded->predict(x);
  ASSERT_EQ(b.shape(), Shape({2, 5, 256}));
  for (std::int64_t i = 0; i < a.numel(); ++i) ASSERT_EQ(a.at(i), b.at(i)) << i;
}

// HDF5 stamps objects with their creation time (in seconds) unless told not
// to; the same network written twice across a second boundary must give the
// same bytes, or `cmp` cannot check deterministic mode.
TEST(ModelFile, SameNetworkWrittenTwiceGivesTheSameBytes) {
  test::TempDir tmp;
  const fs::path& dir = tmp.path();
  Network net(spec(), DType::f32, 5);
  save_model((dir / "first.h5").string(), net);
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  save_model((dir / "second.h5").string(), net);
  const auto first = test::read_text(dir / "first.h5"), second = test::read_text(dir / "second.h5");
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(first == second) << "model files of the same network differ in their bytes";
}

TEST(ModelFile, DiskFullKeepsThePreviousFile) {
  test::TempDir tmp;
  const fs::path& dir = tmp.path();
  const auto path = (dir / "ckpt-10.h5").string();
  Network first(spec(), DType::f32, 1);
  save_model(path, first);
  const auto size = fs::file_size(path);

  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // writes past the limit fail with EFBIG instead
    rlimit limit{size / 2, size / 2};
    setrlimit(RLIMIT_FSIZE, &limit);
    Network second(spec(), DType::f32, 2);
    int code = 0;
    try {
      save_model(path, second);
      code = 10;  // the write should not have succeeded
    } catch (const Error& e) {
      code = std::string(e.what()).find("ckpt-10.h5.tmp") != std::string::npos ? 0 : 11;
    }
    _exit(code);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "10: the write succeeded; 11: the error did not name the file";
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  auto kept = load_model(path);  // still the first network, complete
  auto a = first.named_tensors(), b = kept->named_tensors();
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::int64_t j = 0; j < a[i].second->numel(); ++j) ASSERT_EQ(a[i].second->at(j), b[i].second->at(j));
}

}  // namespace
}  // namespace dlscale
