// Per-layer profile of a network's training step: each layer of the Network
// a config builds (plain stacks, ResNets, transformers), timed alone forward
// and backward on random data of the batch size, median of the repetitions, in wall time and
// in CPU time of the process (all threads; on a machine shared with other
// work the CPU time of a 1-thread run is the steadier figure). Says where a
// step's time goes, for docs/benchmarks.md; bench/run.sh does not need it.
//   layer_bench CONFIG.ini [batch=128] [threads=2] [repetitions=20]
#include <mpi.h>

#include <time.h>

#include <cmath>
#include <cstdio>

#include "bench_common.h"
#include "runtime/core/blas.h"
#include "runtime/core/heap.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

Tensor random_tensor(const Shape& shape, Rng& rng) {
  Tensor t(shape);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(rng.uniform() - 0.5);
  return t;
}

// Random input of `shape` per sample, token ids below the vocabulary where
// an embedding reads it.
Tensor random_input(const Network& net, const Shape& per_sample, bool token_ids, std::int64_t batch, Rng& rng) {
  Shape xs{batch};
  xs.insert(xs.end(), per_sample.begin(), per_sample.end());
  Tensor x = random_tensor(xs, rng);
  if (token_ids) {
    float* p = x.data<float>();
    const auto vocab = static_cast<double>(net.num_classes());
    for (std::int64_t i = 0; i < x.numel(); ++i) p[i] = static_cast<float>(std::floor((p[i] + 0.5) * vocab));
  }
  return x;
}

int run(int argc, char** argv) {
  if (argc < 2) fail("usage: layer_bench CONFIG.ini [batch] [threads] [repetitions]");
  const std::int64_t batch = argc > 2 ? std::stoll(argv[2]) : 128;
  keep_freed_tensor_memory_mapped();  // as the dlscale command line does
  set_cpu_threads(argc > 3 ? std::stoi(argv[3]) : 2);
  const int reps = argc > 4 ? std::stoi(argv[4]) : 20;
  // The layers as Network builds them: graph inputs (input=, add), the first
  // layer's input gradient skipped, a relu that the layer before applies
  // (fused) timed inside that layer.
  Network net(read_spec(argv[1]), DType::f32, 1);
  Rng rng(1);
  // One forward of the whole network sets the layout each node hands on
  // (oneDNN convolutions pass a blocked one to the layers that take it; the
  // others get it plain, as in Network::forward_logits).
  net.forward_logits(random_input(net, net.spec().input_shape, net.nodes().front().kind == "embedding", batch, rng),
                     true);
  double total[4] = {};
  std::printf("%-44s %10s %10s %10s %10s\n", "layer", "fwd ms", "bwd ms", "fwd cpu", "bwd cpu");
  for (std::size_t i = 0; i + 1 < net.nodes().size(); ++i) {
    const Network::Node& node = net.nodes()[i];
    const std::string label = std::to_string(i + 1) + " " + net.spec().layer_lines[i];
    if (!node.layer || node.applied_by_input) {
      std::printf("%-44s %10s\n", label.c_str(), node.layer ? "(fused into the layer before)" : "(an elementwise sum)");
      continue;
    }
    const bool first = node.input < 0;
    const Tensor x = random_input(net, first ? net.spec().input_shape : net.nodes()[node.input].output_shape,
                                  first && node.kind == "embedding", batch, rng)
                         .in_layout(first || !node.layer->takes_blocked_input() ? Layout::plain
                                                                                 : net.output_layouts()[node.input]);
    Tensor y = node.layer->forward(x, true);
    const Tensor dy = random_tensor(y.shape(), rng).in_layout(y.layout());  // as Network hands dL/dy on
    node.layer->backward(dy);
    std::vector<double> t[4];  // forward, backward wall; forward, backward CPU
    for (int r = 0; r < reps; ++r) {
      auto t0 = Clock::now();
      double c0 = cpu_seconds();
      y = node.layer->forward(x, true);
      t[0].push_back(since(t0));
      t[2].push_back(cpu_seconds() - c0);
      t0 = Clock::now();
      c0 = cpu_seconds();
      node.layer->backward(dy);
      t[1].push_back(since(t0));
      t[3].push_back(cpu_seconds() - c0);
    }
    double m[4];
    for (int k = 0; k < 4; ++k) total[k] += m[k] = median(t[k]) * 1e3;
    std::printf("%-44s %10.3f %10.3f %10.3f %10.3f\n", label.c_str(), m[0], m[1], m[2], m[3]);
  }
  std::printf("%-44s %10.3f %10.3f %10.3f %10.3f\n", "total", total[0], total[1], total[2], total[3]);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlscale::bench::run_benchmark("layer_bench", run, argc, argv); }
