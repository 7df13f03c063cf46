// Training-step benchmark of one network on one rank, measured side by side
// in one process:
//  - the step of `dlscale train` (forward, fused softmax loss, backward with
//    gradient buckets, Adam) on batches already in memory, and the same steps
//    fed by the PrefetchLoader from the HDF5 shards (the real loader);
//  - the FLOPs of the step (every dense/conv GEMM, 2·M·N·K, forward + the two
//    backward ones) and OpenBLAS sgemm (and dlscale's own float32 GEMM, oneDNN)
//    timed at exactly those shapes, the faster being the practical limit of
//    the step on this machine, plus a large square OpenBLAS sgemm as the peak.
// Prints `key value` lines for bench/run.sh.
//   train_bench CONFIG.ini DATA_DIR [iterations=50] [threads=2] [repeats=3] [batch=128] [gemm=1]
// (gemm=0 skips the sgemm timings, e.g. to profile the steps alone)
#include <mpi.h>
#include <time.h>

#include <cstdio>
#include <optional>

#include "bench_common.h"
#include "io/dataset.h"
#include "io/loader.h"
#include "io/sampler.h"
#include "layers/softmax.h"
#include <cblas.h>

#include "runtime/core/blas.h"
#include "runtime/core/heap.h"
#include "runtime/parallel/gradient_buckets.h"
#include "runtime/training/optimizer.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;

// One step exactly as runtime/training/trainer.cpp takes it (one rank).
struct Stepper {
  Network& net;
  GradientBuckets& buckets;
  Optimizer& optimizer;
  Communicator& comm;
  std::int64_t batch;
  Tensor dlogits;
  double loss = 0;

  void step(const Batch& b) {
    Tensor logits = net.forward_logits(b.x, true);
    loss = softmax_cross_entropy(logits, b.labels.data(), static_cast<double>(batch), dlogits).loss_sum;
    net.backward(dlogits, [&](const std::vector<Param*>& ready) { buckets.mark_ready(ready); });
    buckets.finish();
    optimizer.step(net.params(), 1e-3);
    double flags[2] = {0, std::isfinite(loss) ? 0.0 : 1.0};  // the trainer's per-step stop flag
    comm.allreduce_sum(flags, 2);
    if (flags[1] > 0) fail("train_bench: the loss became non-finite");
  }
};

// CPU time of the process (all threads): on a machine shared with other
// work, the steadier figure of a 1-thread run.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

std::vector<float> random_floats(std::int64_t n, Rng& rng) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (auto& x : v) x = static_cast<float>(rng.uniform() - 0.5);
  return v;
}

// Median seconds of one sgemm of this shape (after one warm-up call), through
// OpenBLAS's cblas_sgemm directly, or through dlscale's gemm<float> (oneDNN
// when built with it).
double time_gemm(const GemmShape& g, int reps, Rng& rng, bool openblas) {
  auto a = random_floats(g.m * g.k, rng), b = random_floats(g.k * g.n, rng), c = random_floats(g.m * g.n, rng);
  std::vector<double> t;
  for (int r = 0; r <= reps; ++r) {
    auto t0 = Clock::now();
    if (openblas)
      cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans, g.trans_b ? CblasTrans : CblasNoTrans, g.m, g.n,
                  g.k, 1.0f, a.data(), g.trans_a ? g.m : g.k, b.data(), g.trans_b ? g.k : g.n, 0.0f, c.data(), g.n);
    else
      gemm<float>(g.trans_a, g.trans_b, g.m, g.n, g.k, 1.0f, a.data(), b.data(), 0.0f, c.data());
    if (r > 0) t.push_back(since(t0));
  }
  return median(t);
}

int run(int argc, char** argv) {
  if (argc < 3) fail("usage: train_bench CONFIG.ini DATA_DIR [iterations] [threads] [repeats] [batch]");
  const std::string config = argv[1], data_dir = argv[2];
  const int iterations = argc > 3 ? std::stoi(argv[3]) : 50;
  const int threads = argc > 4 ? std::stoi(argv[4]) : 2;
  const int repeats = argc > 5 ? std::stoi(argv[5]) : 3;
  const std::int64_t batch = argc > 6 ? std::stoll(argv[6]) : 128;
  const bool measure_gemm = argc > 7 ? std::stoi(argv[7]) != 0 : true;
  keep_freed_tensor_memory_mapped();  // as the dlscale command line does
  set_cpu_threads(threads);
  Communicator comm;

  const NetworkSpec spec = read_spec(config);
  Network net(spec, DType::f32, 1);
  DatasetInfo data = open_dataset(data_dir);
  SolverOptions solver;
  solver.solver = "adam";
  solver.l2_regularization = 0;  // as PyTorch's Adam in bench/pytorch_cnn.py
  auto optimizer = make_optimizer(solver);
  GradientBuckets buckets(net.params(), comm, std::size_t(25) << 20);
  Stepper stepper{net, buckets, *optimizer, comm, batch, {}, 0};

  DistributedSampler sampler(data.num_samples, batch, 0, 1, ShuffleMode::every_epoch, 1);
  auto all = sampler.epoch_batches(0);
  const int warmup = 5;
  if (static_cast<std::size_t>(iterations + warmup) > all.size())
    fail("train_bench: " + std::to_string(iterations + warmup) + " steps do not fit one epoch of " + data_dir);
  std::vector<std::vector<std::int64_t>> timed(all.begin() + warmup, all.begin() + warmup + iterations);
  std::vector<Batch> in_memory(static_cast<std::size_t>(iterations));
  {
    DatasetReader reader(data);
    for (int i = 0; i < iterations; ++i) reader.read(timed[i], DType::f32, in_memory[i].x, in_memory[i].labels);
    Batch b;
    for (int i = 0; i < warmup; ++i) {
      reader.read(all[i], DType::f32, b.x, b.labels);
      stepper.step(b);
    }
  }

  // Both feeds alternate, so load from other processes hits them alike.
  std::vector<double> memory_t, memory_cpu, loader_t, wait_t;
  for (int r = 0; r < repeats; ++r) {
    auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    for (const Batch& b : in_memory) stepper.step(b);
    memory_t.push_back(since(t0) / iterations);
    memory_cpu.push_back((cpu_seconds() - c0) / iterations);

    double wait = 0;
    t0 = Clock::now();
    {
      PrefetchLoader loader(data, timed, DType::f32);
      for (;;) {
        auto w0 = Clock::now();
        auto b = loader.next();
        wait += since(w0);
        if (!b) break;
        stepper.step(*b);
      }
    }
    loader_t.push_back(since(t0) / iterations);
    wait_t.push_back(wait / iterations);
  }

  const auto gemms = step_gemms(spec, batch);
  const double flops = total_flops(gemms);
  Rng rng(7);
  double gemm_s = 0, ours_s = 0, square_s = 0;
  const GemmShape square{"square", false, false, 2048, 2048, 2048};
  if (measure_gemm) {
    for (const auto& g : gemms) gemm_s += time_gemm(g, 5, rng, true), ours_s += time_gemm(g, 5, rng, false);
    square_s = time_gemm(square, 3, rng, true);
  }

  const double mem = median(memory_t), load = median(loader_t);
  std::printf("config %s\nthreads %d\nbatch %lld\niterations %d\nrepeats %d\n", config.c_str(), threads,
              static_cast<long long>(batch), iterations, repeats);
  std::printf("gflop_per_step %.4f\n", flops / 1e9);
  std::printf("memory_step_cpu_ms %.3f\n", median(memory_cpu) * 1e3);
  std::printf("gemm_backend %s\n", float_gemm_backend());
  std::printf("memory_step_ms %.3f\nloader_step_ms %.3f\nloader_wait_ms %.3f\n", mem * 1e3, load * 1e3,
              median(wait_t) * 1e3);
  std::printf("memory_samples_per_s %.1f\nloader_samples_per_s %.1f\n", batch / mem, batch / load);
  std::printf("step_gflops %.2f\n", flops / mem / 1e9);
  if (measure_gemm) {
    std::printf("sgemm_same_shapes_ms %.3f\nsgemm_same_shapes_gflops %.2f\n", gemm_s * 1e3, flops / gemm_s / 1e9);
    std::printf("gemm_backend_same_shapes_gflops %.2f\n", flops / ours_s / 1e9);
    // The limit: the faster of OpenBLAS and the GEMM dlscale runs on.
    std::printf("sgemm_best_same_shapes_gflops %.2f\n", flops / std::min(gemm_s, ours_s) / 1e9);
    std::printf("sgemm_2048_gflops %.2f\n", square.flops() / square_s / 1e9);
  }
  for (const auto& g : gemms)
    std::printf("# gemm %-22s %c%c m=%-6lld n=%-6lld k=%-6lld %.3f GFLOP\n", g.what.c_str(), g.trans_a ? 'T' : 'N',
                g.trans_b ? 'T' : 'N', static_cast<long long>(g.m), static_cast<long long>(g.n),
                static_cast<long long>(g.k), g.flops() / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlscale::bench::run_benchmark("train_bench", run, argc, argv); }
