// Helpers shared by the benchmark programs: the network of a config file,
// timing, means, medians and the FLOPs of a training step.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "layers/conv2d.h"
#include "layers/network.h"
#include "layers/registry.h"
#include "runtime/core/rng.h"
#include "runtime/parallel/mpi_env.h"

namespace dlscale::bench {

using Clock = std::chrono::steady_clock;
inline double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

inline double mean(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / v.size();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The network of a dlscale config file: its `input` and `layer` lines.
inline NetworkSpec read_spec(const std::string& path) {
  NetworkSpec spec;
  spec.source = path;
  std::ifstream in(path);
  if (!in) fail("cannot open " + path);
  for (std::string line; std::getline(in, line);) {
    auto eq = line.find('=');
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    auto key = line.substr(0, line.find_last_not_of(' ', eq - 1) + 1), value = line.substr(eq + 1);
    value = value.substr(value.find_first_not_of(' '));
    if (key == "input") spec.input_shape = parse_shape(value, "input");
    if (key == "layer") spec.layer_lines.push_back(value);
  }
  return spec;
}

// One GEMM of a training step as OpenBLAS would run it (row-major,
// C (m×n) = op(A) (m×k) · op(B) (k×n)); conv layers count as the GEMM of
// their im2col lowering, which has the same FLOPs as a direct convolution.
struct GemmShape {
  std::string what;  // "layer1 dense fwd"
  bool trans_a = false, trans_b = false;
  std::int64_t m = 0, n = 0, k = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

// The GEMMs of forward + backward of one step on a batch of `batch`: per
// dense/conv layer one forward, one weight-gradient and (except the first
// layer, whose input gradient nobody needs: dlscale and PyTorch both skip
// it) one input-gradient GEMM, each 2·M·N·K FLOPs.
inline std::vector<GemmShape> step_gemms(const NetworkSpec& spec, std::int64_t batch) {
  std::vector<GemmShape> out;
  Rng rng(1);
  Shape shape = spec.input_shape;
  bool first = true;
  for (std::size_t i = 0; i < spec.layer_lines.size(); ++i) {
    auto line = LayerSpec::parse(spec.layer_lines[i], spec.source);
    auto layer = make_layer(line, LayerContext{shape, DType::f32, &rng, static_cast<int>(i)});
    const std::string name = "layer" + std::to_string(i + 1) + " " + line.kind();
    if (line.kind() == "dense") {
      std::int64_t features = numel(shape), units = layer->output_shape()[0];
      out.push_back({name + " fwd", false, true, batch, units, features});
      out.push_back({name + " dW", true, false, units, features, batch});
      if (!first) out.push_back({name + " dx", false, false, batch, features, units});
      first = false;
    } else if (line.kind() == "conv2d") {
      const Conv2dGeometry& g = dynamic_cast<Conv2d&>(*layer).geometry();
      std::int64_t rows = g.channels * g.kernel * g.kernel, cols = batch * g.out_height() * g.out_width();
      out.push_back({name + " fwd", false, false, g.filters, cols, rows});
      out.push_back({name + " dW", false, true, g.filters, rows, cols});
      if (!first) out.push_back({name + " dx", true, false, rows, cols, g.filters});
      first = false;
    }
    shape = layer->output_shape();
  }
  return out;
}

inline double total_flops(const std::vector<GemmShape>& gemms) {
  double s = 0;
  for (const auto& g : gemms) s += g.flops();
  return s;
}

// main() of every benchmark program: MPI around `run`, an error printed
// with the program's name; with several ranks the failing one aborts the job
// so no rank waits in a collective.
inline int run_benchmark(const char* name, int (*run)(int, char**), int argc, char** argv) {
  choose_mpi_defaults();  // as dlscale's own ranks run
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", name, e.what());
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (size > 1) MPI_Abort(MPI_COMM_WORLD, 1);
    code = 1;
  }
  MPI_Finalize();
  return code;
}

}  // namespace dlscale::bench
