// Every layer's kernels from any state and at any thread count:
//  - backward overwrites its parameters' gradients: a gradient pre-filled
//    with NaN (what a skipped, overflowed loss-scaled step leaves) must come
//    out as if it had been zero (conv2d wrote db = 0 * db + s, so a NaN there
//    never cleared and every later step overflowed);
//  - forward and backward give the same bits at 1 to 64 threads, on batches
//    of 1 and of a prime size, and extents smaller than the thread count.
//    One exception, measured and bounded: oneDNN's float32 convolution sums
//    the weight and bias gradients over the batch in per-thread parts, so
//    their bits follow the thread count (docs/user-guide.md, "Deterministic
//    mode", promises bits for a fixed thread count only).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "layer_factory.h"
#include "runtime/core/blas.h"

namespace dlscale {
namespace {

using testing::build_layer;
using testing::random_tensor;

struct LayerCase {
  std::string line;
  Shape sample;       // one input sample
  bool token_ids = false;  // the input is ids in [0, 5)
};

// Each layer family, with sizes that make the threaded paths split work:
// GEMMs above the banding threshold, more rows than 8, odd extents.
std::vector<LayerCase> layer_cases() {
  return {{"dense units=67", {4099}},
          {"dense units=13 per_position=true", {11, 37}},
          {"conv2d filters=5 kernel=3 padding=same", {3, 13, 11}},
          {"conv2d filters=16 kernel=3 padding=same", {16, 9, 9}},  // oneDNN's Winograd case in float32
          {"conv2d filters=7 kernel=3 stride=2", {2, 15, 13}},
          {"conv2d filters=3 kernel=1 bias=false", {5, 7, 7}},
          {"maxpool size=2", {3, 10, 9}},
          {"avgpool size=2", {3, 10, 9}},
          {"globalavgpool", {17, 5, 3}},
          {"batchnorm", {5, 7, 3}},
          {"batchnorm", {16, 5, 5}},  // the blocked path in float32
          {"batchnorm", {23}},
          {"relu", {131}},
          {"gelu", {131}},
          {"tanh", {131}},
          {"sigmoid", {131}},
          {"leakyrelu alpha=0.1", {131}},
          {"flatten", {3, 4, 5}},
          {"softmax", {19}},
          {"embedding vocab=5 dim=9", {13}, true},
          {"posembedding", {13, 9}},
          {"layernorm", {13, 9}},
          {"attention heads=3 causal=true", {13, 9}},
          {"attention heads=1 causal=false", {5, 4}}};
}

Shape batch_shape(std::int64_t n, const Shape& sample) {
  Shape s{n};
  s.insert(s.end(), sample.begin(), sample.end());
  return s;
}

Tensor input_for(const LayerCase& c, std::int64_t n, DType dtype, Rng& rng) {
  Tensor x = random_tensor(batch_shape(n, c.sample), rng, dtype);
  if (c.token_ids)
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set(i, static_cast<double>(static_cast<int>(i * 7 + n) % 5));
  return x;
}

// What one forward and backward of a freshly built layer produce, as bytes.
struct Outcome {
  std::vector<Tensor> tensors;  // y, dx, then every param's grad, plain
  std::vector<std::string> names;
};

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// max |a - b| over max(1, max |a|).
double relative_difference(const Tensor& a, const Tensor& b) {
  double diff = 0, top = 1;
  for (std::int64_t i = 0; i < a.numel(); ++i)
    diff = std::max(diff, std::fabs(a.at(i) - b.at(i))), top = std::max(top, std::fabs(a.at(i)));
  return diff / top;
}

bool any_nan(const Tensor& t) {
  const Tensor p = t.plain();
  for (std::int64_t i = 0; i < p.numel(); ++i)
    if (std::isnan(p.at(i))) return true;
  return false;
}

Outcome run_layer(const LayerCase& c, std::int64_t n, DType dtype, int threads, bool nan_grads) {
  const int before = cpu_threads();
  set_cpu_threads(threads);
  auto layer = build_layer(c.line, c.sample, dtype, 3);
  Rng rng(17);
  const Tensor x = input_for(c, n, dtype, rng);
  Tensor y = layer->forward(x, true);
  const Tensor dy = random_tensor(y.shape(), rng, dtype);
  if (nan_grads)
    for (Param* p : layer->params())
      for (std::int64_t i = 0; i < p->grad.numel(); ++i) p->grad.set(i, std::numeric_limits<double>::quiet_NaN());
  Tensor dx = layer->backward(y.blocked() ? dy.in_layout(y.layout()) : dy);
  set_cpu_threads(before);
  Outcome o;
  o.tensors = {y.plain(), dx.empty() ? Tensor() : dx.plain()};
  o.names = {"y", "dx"};
  for (Param* p : layer->params()) {
    EXPECT_FALSE(any_nan(p->grad)) << c.line << ": the NaN pre-filled into " << p->name << "'s gradient survived backward";
    o.tensors.push_back(p->grad.clone());
    o.names.push_back(p->name + " grad");
  }
  return o;
}

std::string dtype_name(DType d) { return d == DType::f32 ? "float32" : "float64"; }

TEST(LayerKernels, BackwardOverwritesGradientsHoldingNaN) {
  for (DType dtype : {DType::f64, DType::f32})
    for (const auto& c : layer_cases())
      for (int threads : {1, 2}) {
        SCOPED_TRACE(c.line + " " + dtype_name(dtype) + " at " + std::to_string(threads) + " threads");
        const Outcome clean = run_layer(c, 7, dtype, threads, false);
        const Outcome dirty = run_layer(c, 7, dtype, threads, true);
        for (std::size_t i = 0; i < clean.tensors.size(); ++i)
          EXPECT_TRUE(same_bits(clean.tensors[i], dirty.tensors[i]))
              << clean.names[i] << " depends on what the gradient held";
      }
}

TEST(LayerKernels, SameBitsAtEveryThreadCount) {
  double worst_onednn = 0;  // the exception's measured difference, printed beside its bound
  const double onednn_bound = 1e-5;
  for (DType dtype : {DType::f64, DType::f32})
    for (const auto& c : layer_cases())
      for (std::int64_t n : {1, 7}) {
        // Batch norm on features needs two samples per channel to train.
        if (n == 1 && c.line == "batchnorm" && c.sample.size() == 1) n = 2;
        const Outcome one = run_layer(c, n, dtype, 1, false);
        const bool onednn_conv = dtype == DType::f32 && c.line.rfind("conv2d", 0) == 0;
        for (int threads = 2; threads <= 64; ++threads) {
          SCOPED_TRACE(c.line + " " + dtype_name(dtype) + ", batch " + std::to_string(n) + ", " +
                       std::to_string(threads) + " threads");
          const Outcome many = run_layer(c, n, dtype, threads, false);
          bool same = true;
          for (std::size_t i = 0; i < one.tensors.size(); ++i) {
            if (onednn_conv && i >= 2) {  // a parameter's gradient: oneDNN's per-thread partial sums
              const double d = relative_difference(one.tensors[i], many.tensors[i]);
              worst_onednn = std::max(worst_onednn, d);
              EXPECT_LE(d, onednn_bound) << one.names[i] << " differs from the one-thread result";
              continue;
            }
            const bool equal = same_bits(one.tensors[i], many.tensors[i]);
            EXPECT_TRUE(equal) << one.names[i] << " differs from the one-thread result";
            same = same && equal;
          }
          if (!same) break;  // one report per case
        }
      }
  std::printf("float32 oneDNN convolution parameter gradients, 2-64 threads against 1: largest relative "
              "difference %.3g (bound %.0e)\n", worst_onednn, onednn_bound);
}

}  // namespace
}  // namespace dlscale
