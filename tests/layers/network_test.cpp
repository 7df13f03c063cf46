// Network: building from specs, spec errors, residual joins and the
// finite-difference gradient of a whole small ResNet-style network.
#include <gtest/gtest.h>

#include <cstdlib>

#include "gradient_check.h"
#include "layers/network.h"
#include "layers/softmax.h"

namespace dlscale {
namespace {

// Mean fused softmax cross-entropy of a training-mode forward over the
// labels; dlogits receives its gradient. The gradient checks call it as their
// loss (with a scratch dlogits) and once for backward's input.
double mean_loss(Network& net, const Tensor& x, const std::vector<std::int32_t>& labels, Tensor& dlogits) {
  const double count = static_cast<double>(labels.size());
  return softmax_cross_entropy(net.forward_logits(x, true), labels.data(), count, dlogits).loss_sum / count;
}

NetworkSpec residual_spec() {
  NetworkSpec spec;
  spec.input_shape = {2, 5, 5};
  spec.layer_lines = {"conv2d filters=3 kernel=3 padding=same name=stem",
                      "tanh name=t0",
                      "conv2d filters=3 kernel=3 padding=same",
                      "tanh",
                      "add from=t0",
                      "avgpool size=2 stride=1",
                      "dense units=4",
                      "softmax"};
  return spec;
}

// A ResNet downsampling block: the main path convolves with stride 2, the
// skip path is a 1×1 stride-2 convolution plus batchnorm on the block input
// (input=b_in), the two are added, and global average pooling feeds dense.
NetworkSpec projection_spec() {
  NetworkSpec spec;
  spec.input_shape = {2, 6, 5};
  spec.layer_lines = {"conv2d filters=2 kernel=3 padding=same bias=false",
                      "batchnorm",
                      "tanh name=b_in",
                      "conv2d filters=3 kernel=3 stride=2 padding=same bias=false",
                      "batchnorm",
                      "tanh",
                      "conv2d filters=3 kernel=3 padding=same bias=false",
                      "batchnorm name=main",
                      "conv2d filters=3 kernel=1 stride=2 bias=false input=b_in",
                      "batchnorm name=shortcut",
                      "add from=main",
                      "tanh",
                      "globalavgpool",
                      "dense units=4",
                      "softmax"};
  return spec;
}

std::string error_of(const NetworkSpec& spec) {
  try {
    Network net(spec, DType::f32, 0);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Network, BuildsAndDescribesAResidualNetwork) {
  Network net(residual_spec(), DType::f64, 3);
  EXPECT_EQ(net.num_classes(), 4);
  EXPECT_NE(net.describe().find("add"), std::string::npos);
  Rng rng(1);
  Tensor probs = net.predict(testing::random_tensor({3, 2, 5, 5}, rng));
  ASSERT_EQ(probs.shape(), (Shape{3, 4}));
  for (int i = 0; i < 3; ++i) {
    double row = 0;
    for (int k = 0; k < 4; ++k) row += probs.at(i * 4 + k);
    EXPECT_NEAR(row, 1.0, 1e-12);
  }
}

// dL/dparam of the whole network, loss = fused softmax cross-entropy,
// against central differences: this checks the add join's gradient routing.
TEST(Network, ResidualGradientsMatchFiniteDifferences) {
  Network net(residual_spec(), DType::f64, 5);
  Rng rng(2);
  Tensor x = testing::random_tensor({3, 2, 5, 5}, rng);
  std::vector<std::int32_t> labels = {0, 3, 1};
  Tensor dlogits;
  auto loss = [&]() {
    Tensor scratch;
    return mean_loss(net, x, labels, scratch);
  };
  mean_loss(net, x, labels, dlogits);
  net.backward(dlogits);
  testing::check_param_gradients(net.params(), loss, 1e-6, 1e-6, "network");
}

TEST(Network, ProjectionShortcutTakesTheNamedInput) {
  Network net(projection_spec(), DType::f64, 3);
  const auto& nodes = net.nodes();
  ASSERT_EQ(nodes.size(), 15u);
  EXPECT_EQ(nodes[8].input, 2);  // the 1×1 convolution reads b_in, not main
  EXPECT_EQ(nodes[8].output_shape, (Shape{3, 3, 3}));
  EXPECT_EQ(nodes[10].input, 9);
  EXPECT_EQ(nodes[10].add_from, 7);
  EXPECT_EQ(nodes[12].output_shape, (Shape{3}));
  EXPECT_EQ(net.num_classes(), 4);
  // describe() names the inputs where the graph branches or joins.
  const std::string text = net.describe();
  EXPECT_NE(text.find("layer9     conv2d        3x3x3          6          b_in\n"), std::string::npos) << text;
  EXPECT_NE(text.find("add           3x3x3          0          shortcut + main\n"), std::string::npos) << text;
}

// The skip path's gradient must reach the block input: without it the
// stem's gradients (nodes 1-3) would miss the shortcut's share.
TEST(Network, ProjectionShortcutGradientsMatchFiniteDifferences) {
  Network net(projection_spec(), DType::f64, 5);
  Rng rng(2);
  Tensor x = testing::random_tensor({4, 2, 6, 5}, rng);
  std::vector<std::int32_t> labels = {0, 3, 1, 2};
  Tensor dlogits;
  auto loss = [&]() {
    Tensor scratch;
    return mean_loss(net, x, labels, scratch);
  };
  mean_loss(net, x, labels, dlogits);
  std::vector<const Param*> order;
  net.backward(dlogits, [&](const std::vector<Param*>& ready) { order.insert(order.end(), ready.begin(), ready.end()); });
  testing::check_param_gradients(net.params(), loss, 1e-6, 1e-6, "network");
  // Layers finish in reverse order, the shortcut (nodes 9-10) before the
  // main path (nodes 4-8): gradient buckets rely on it.
  std::vector<const Param*> expected;
  for (auto node = net.nodes().rbegin(); node != net.nodes().rend(); ++node)
    if (node->layer)
      for (const Param* p : node->layer->params()) expected.push_back(p);
  EXPECT_EQ(order, expected);
}

// A pre-norm transformer block on byte-like tokens, as docs/user-guide.md
// declares it, ending in one prediction per position.
NetworkSpec transformer_spec() {
  NetworkSpec spec;
  spec.input_shape = {4};
  spec.layer_lines = {"embedding vocab=6 dim=8",
                      "posembedding name=x0",
                      "layernorm",
                      "attention heads=2 causal=true",
                      "add from=x0 name=x1",
                      "layernorm",
                      "dense units=16 per_position=true",
                      "gelu",
                      "dense units=8 per_position=true",
                      "add from=x1",
                      "layernorm",
                      "dense units=6 per_position=true",
                      "softmax"};
  return spec;
}

// The per-position loss (N·T labels, mean per token) through the whole
// block, residual joins included, against central differences.
TEST(Network, TransformerBlockGradientsMatchFiniteDifferences) {
  Network net(transformer_spec(), DType::f64, 5);
  EXPECT_EQ(net.num_classes(), 6);
  EXPECT_EQ(net.positions(), 4);
  Rng rng(2);
  Tensor x({3, 4}, DType::f64);
  for (int i = 0; i < 12; ++i) x.set(i, static_cast<double>(rng.below(6)));
  std::vector<std::int32_t> labels(12);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(6));
  // Offsets away from 1 and 0 so layer norms' scale and offset gradients
  // are checked at a generic point.
  for (Param* p : net.params())
    if (p->name == "scale" || p->name == "offset")
      for (std::int64_t i = 0; i < p->value.numel(); ++i) p->value.set(i, rng.normal(0.5, 0.5));
  Tensor dlogits;
  auto loss = [&]() {
    Tensor scratch;
    return mean_loss(net, x, labels, scratch);
  };
  Tensor logits = net.forward_logits(x, true);
  ASSERT_EQ(logits.shape(), (Shape{3, 4, 6}));
  softmax_cross_entropy(logits, labels.data(), 12.0, dlogits);
  net.backward(dlogits);
  testing::check_param_gradients(net.params(), loss, 1e-6, 1e-6, "transformer");
  Tensor probs = net.predict(x);
  ASSERT_EQ(probs.shape(), (Shape{3, 4, 6}));
}

TEST(Network, SameSeedSameWeightsAndFloat64EndToEnd) {
  Network a(residual_spec(), DType::f64, 9), b(residual_spec(), DType::f64, 9);
  auto ta = a.named_tensors(), tb = b.named_tensors();
  ASSERT_EQ(ta.size(), tb.size());
  for (std::size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].first, tb[i].first);
    EXPECT_EQ(ta[i].second->dtype(), DType::f64);
    for (std::int64_t j = 0; j < ta[i].second->numel(); ++j) EXPECT_EQ(ta[i].second->at(j), tb[i].second->at(j));
  }
  Rng rng(1);
  EXPECT_EQ(a.predict(testing::random_tensor({1, 2, 5, 5}, rng)).dtype(), DType::f64);
}

// Inside a Network, float32 convolutions hand their activations on in
// oneDNN's blocked layout (Layout::channels16) through batch norm, ReLU, the
// residual add and the next convolution; the results must be those of the
// plain im2col path (DLSCALE_ONEDNN=0), up to float32 rounding.
TEST(Network, BlockedActivationsMatchThePlainPath) {
  NetworkSpec spec;
  spec.input_shape = {3, 8, 8};
  spec.layer_lines = {"conv2d filters=16 kernel=3 padding=same bias=false",
                      "batchnorm",
                      "relu name=b_in",
                      "conv2d filters=16 kernel=3 padding=same bias=false",
                      "batchnorm",
                      "relu",
                      "conv2d filters=16 kernel=3 padding=same bias=false",
                      "batchnorm name=main",
                      "add from=b_in",
                      "relu",
                      "conv2d filters=32 kernel=3 stride=2 padding=same bias=false",
                      "batchnorm",
                      "relu",
                      "globalavgpool",
                      "dense units=5",
                      "softmax"};
  Rng rng(4);
  const Tensor x = testing::random_tensor({6, 3, 8, 8}, rng, DType::f32);
  const std::vector<std::int32_t> labels = {0, 4, 1, 2, 3, 0};
  struct Result {
    Tensor logits;
    std::vector<Tensor> grads;
    std::vector<Layout> layouts;
  };
  auto run = [&](const char* onednn) {
    setenv("DLSCALE_ONEDNN", onednn, 1);
    Network net(spec, DType::f32, 9);
    unsetenv("DLSCALE_ONEDNN");
    for (int i : {2, 5, 12}) EXPECT_TRUE(net.nodes()[i].applied_by_input) << i;
    EXPECT_FALSE(net.nodes()[9].applied_by_input);
    Result r;
    r.logits = net.forward_logits(x, true).clone();
    r.layouts = net.output_layouts();
    Tensor dlogits;
    softmax_cross_entropy(r.logits, labels.data(), 6.0, dlogits);
    net.backward(dlogits);
    for (Param* p : net.params()) r.grads.push_back(p->grad.clone());
    return r;
  };
  const Result blocked = run("direct");  // direct: exact to float32 rounding (Winograd is not)
  const Result plain = run("0");
  for (Layout l : plain.layouts) EXPECT_EQ(l, Layout::plain);
  if (blocked.layouts[0] == Layout::plain)
    GTEST_SKIP() << "oneDNN chose no 16-channel blocked layout on this CPU (no AVX-512): nothing to compare";
  // conv, batchnorm, relu, the add and the strided conv's chain stay blocked.
  // The relus after batch norms are applied by them; the one after the add is not.
  for (int i : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) EXPECT_EQ(blocked.layouts[i], Layout::channels16) << i;
  EXPECT_EQ(blocked.layouts[13], Layout::plain);  // globalavgpool reads plain
  testing::expect_close(blocked.logits, plain.logits, 1e-4, "logits");
  ASSERT_EQ(blocked.grads.size(), plain.grads.size());
  for (std::size_t i = 0; i < plain.grads.size(); ++i)
    testing::expect_close(blocked.grads[i], plain.grads[i], 1e-4, "param grad " + std::to_string(i));
}

// A relu that alone reads a batch norm's output is applied by the batch norm
// (Layer::fuse_relu); one whose input has other readers is not. Float64
// gradients through the fused pair against central differences.
TEST(Network, BatchNormAppliesTheReluAfterIt) {
  NetworkSpec spec;
  spec.input_shape = {2, 5, 5};
  spec.layer_lines = {"conv2d filters=3 kernel=3 padding=same",
                      "batchnorm",
                      "relu name=r1",
                      "conv2d filters=3 kernel=3 padding=same",
                      "batchnorm name=bn2",
                      "relu",
                      "add from=bn2",
                      "globalavgpool",
                      "dense units=3",
                      "softmax"};
  Network net(spec, DType::f64, 5);
  EXPECT_TRUE(net.nodes()[2].applied_by_input);
  EXPECT_FALSE(net.nodes()[5].applied_by_input);  // bn2 is also read by the add
  Rng rng(2);
  Tensor x = testing::random_tensor({4, 2, 5, 5}, rng);
  std::vector<std::int32_t> labels = {0, 2, 1, 2};
  Tensor dlogits;
  auto loss = [&]() {
    Tensor scratch;
    return mean_loss(net, x, labels, scratch);
  };
  mean_loss(net, x, labels, dlogits);
  net.backward(dlogits);
  testing::check_param_gradients(net.params(), loss, 1e-6, 1e-5, "network");
}

TEST(Network, SpecErrorsNameTheProblem) {
  NetworkSpec spec;
  spec.source = "my.ini";
  spec.input_shape = {1, 8, 8};
  spec.layer_lines = {"conv2d filters=2 kernel=3", "bogus size=3", "softmax"};
  EXPECT_NE(error_of(spec).find("my.ini: layer 2: unknown layer 'bogus'"), std::string::npos) << error_of(spec);

  spec.layer_lines = {"dense units=4 colour=red", "softmax"};
  EXPECT_NE(error_of(spec).find("unknown attribute 'colour'"), std::string::npos) << error_of(spec);

  spec.layer_lines = {"dense units=4"};
  EXPECT_NE(error_of(spec).find("last layer must be softmax"), std::string::npos) << error_of(spec);

  spec.layer_lines = {"dense units=4 name=a", "dense units=3", "add from=a", "softmax"};
  EXPECT_NE(error_of(spec).find("cannot add the output of 'a' (4) to 3"), std::string::npos) << error_of(spec);

  spec.layer_lines = {"dense units=4", "add from=nowhere", "softmax"};
  EXPECT_NE(error_of(spec).find("from=nowhere names no earlier layer"), std::string::npos) << error_of(spec);

  spec.layer_lines = {"conv2d filters=2 kernel=3", "softmax"};
  EXPECT_NE(error_of(spec).find("layer 2: softmax: input must be a vector"), std::string::npos) << error_of(spec);

  spec.layer_lines = {"dense units=4", "dense units=3 input=nowhere", "softmax"};
  EXPECT_NE(error_of(spec).find("layer 2: dense: input=nowhere names no earlier layer"), std::string::npos)
      << error_of(spec);

  // A branch no later layer takes: its output would get no gradient.
  spec.layer_lines = {"dense units=4 name=a", "dense units=5", "dense units=3 input=a", "softmax"};
  EXPECT_NE(error_of(spec).find("my.ini: layer 2 ('layer2'): no later layer takes its output"), std::string::npos)
      << error_of(spec);

  spec.layer_lines = {"dense units=4", "globalavgpool", "softmax"};
  EXPECT_NE(error_of(spec).find("layer 2: globalavgpool: needs a C×H×W input, got 4"), std::string::npos)
      << error_of(spec);
}

TEST(Network, InputShapeMismatchIsAnError) {
  NetworkSpec spec;
  spec.input_shape = {784};
  spec.layer_lines = {"dense units=3", "softmax"};
  Network net(spec, DType::f32, 0);
  Tensor x({2, 1, 28, 28});
  EXPECT_THROW(net.forward_logits(x, false), Error);
  EXPECT_THROW(net.forward_logits(Tensor({2, 784}, DType::f64), false), Error);
}

TEST(Network, ParseShape) {
  EXPECT_EQ(parse_shape("1x28x28", "input"), (Shape{1, 28, 28}));
  EXPECT_EQ(parse_shape("784", "input"), (Shape{784}));
  EXPECT_THROW(parse_shape("1x0x2", "input"), Error);
  EXPECT_THROW(parse_shape("axb", "input"), Error);
}

}  // namespace
}  // namespace dlscale
