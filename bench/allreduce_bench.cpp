// Gradient all-reduce benchmark, run under mpirun -n 2 (or more):
//  1. our bucketed all-reduce of a model's gradients against one plain
//     MPI_Allreduce of the same bytes, measured in the same run (ratio);
//  2. the share of all-reduce hidden behind backward: the gradient bytes
//     whose all-reduce, started as their bucket filled, had completed by the
//     time backward ended (GradientBuckets::hidden_share), with MPI_Iallreduce
//     and with deterministic mode's FixedOrderAllreduce.
// Each measurement first checks the sums, then times.
//   mpirun -n 2 allreduce_bench examples/fashion-mnist/cnn.ini [repetitions] [local batch] [bucket MiB]
// 3. Deterministic mode's cost: FixedOrderAllreduce against MPI_Allreduce of
//    1, 16 and 64 MB of float32, alternating, medians:
//   mpirun -n 4 allreduce_bench fixed-order [repetitions]
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "bench_common.h"
#include "layers/network.h"
#include "layers/softmax.h"
#include "runtime/core/blas.h"
#include "runtime/parallel/fixed_order_allreduce.h"
#include "runtime/parallel/gradient_buckets.h"
#include "runtime/core/rng.h"

namespace {

using namespace dlscale;
using namespace dlscale::bench;

// Alternates the two so that a busy machine slows both alike; every sum is
// checked (small integers: exact in any order).
int run_fixed_order(Communicator& comm, int reps) {
  if (comm.rank() == 0)
    std::printf("ranks %d, float32, medians of %d\n%-8s %16s %16s %8s\n", comm.size(), reps, "MB",
                "MPI_Allreduce ms", "fixed-order ms", "ratio");
  for (const double mb : {1.0, 16.0, 64.0}) {
    const auto n = static_cast<std::int64_t>(mb * 1e6 / 4);
    Tensor a({n}), b({n});
    FixedOrderAllreduce fixed(comm.get(), 0);
    std::vector<double> plain_t, fixed_t;
    const float want = static_cast<float>(comm.size() * (comm.size() + 1) / 2);
    for (int r = 0; r < reps + 2; ++r) {
      std::fill_n(a.data<float>(), n, static_cast<float>(comm.rank() + 1));
      std::fill_n(b.data<float>(), n, static_cast<float>(comm.rank() + 1));
      MPI_Barrier(comm.get());
      auto t0 = Clock::now();
      MPI_Allreduce(MPI_IN_PLACE, a.raw(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, comm.get());
      if (r >= 2) plain_t.push_back(since(t0));
      MPI_Barrier(comm.get());
      t0 = Clock::now();
      fixed.start(b);
      fixed.wait();
      if (r >= 2) fixed_t.push_back(since(t0));
      if (a.data<float>()[n - 1] != want || b.data<float>()[n - 1] != want || b.data<float>()[0] != want)
        fail("an all-reduce gave a wrong sum");
    }
    if (comm.rank() == 0)
      std::printf("%-8.0f %16.3f %16.3f %8.2f\n", mb, median(plain_t) * 1e3, median(fixed_t) * 1e3,
                  median(fixed_t) / median(plain_t));
  }
  return 0;
}

int run(int argc, char** argv) {
  Communicator comm;
  if (argc >= 2 && std::string(argv[1]) == "fixed-order") return run_fixed_order(comm, argc > 2 ? std::stoi(argv[2]) : 20);
  if (argc < 2) fail("usage: allreduce_bench CONFIG.ini [repetitions] [local batch]");
  const int reps = argc > 2 ? std::stoi(argv[2]) : 50;
  const int batch = argc > 3 ? std::stoi(argv[3]) : 64;
  set_cpu_threads(1);
  Network net(read_spec(argv[1]), DType::f32, 1);
  std::int64_t elements = 0;
  for (Param* p : net.params()) elements += p->grad.numel();
  const double bucket_mib = argc > 4 ? std::stod(argv[4]) : 25.0;
  GradientBuckets buckets(net.params(), comm, static_cast<std::size_t>(bucket_mib * (1 << 20)));

  // 1. Plain MPI_Allreduce of the same bytes vs our buckets, all grads ready.
  std::vector<float> flat(elements, 1.0f);
  std::vector<double> plain_t, ours_t;
  for (int r = 0; r < reps + 5; ++r) {
    std::fill(flat.begin(), flat.end(), 1.0f);
    MPI_Barrier(comm.get());
    auto t0 = Clock::now();
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(elements), MPI_FLOAT, MPI_SUM, comm.get());
    if (r >= 5) plain_t.push_back(since(t0));
    if (flat[elements / 2] != static_cast<float>(comm.size())) fail("plain all-reduce gave a wrong sum");

    for (Param* p : net.params()) std::fill_n(p->grad.data<float>(), p->grad.numel(), 1.0f);
    MPI_Barrier(comm.get());
    t0 = Clock::now();
    auto params = net.params();
    for (auto it = params.rbegin(); it != params.rend(); ++it) buckets.mark_ready({*it});
    buckets.finish();
    if (r >= 5) ours_t.push_back(since(t0));
    for (Param* p : params)
      if (p->grad.data<float>()[0] != static_cast<float>(comm.size())) fail("bucketed all-reduce gave a wrong sum");
  }

  // 2. Training steps on random data: buckets started during backward or after it.
  Rng rng(comm.rank() + 1);
  Shape xs{batch};
  xs.insert(xs.end(), net.spec().input_shape.begin(), net.spec().input_shape.end());
  Tensor x(xs);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(rng.uniform());
  std::vector<std::int32_t> labels(batch);
  for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(net.num_classes()));
  Tensor dlogits;
  // One bucketer per mode: it owns the grads' storage (they are its views).
  // Deterministic mode's buckets (FixedOrderAllreduce) run the same steps after.
  auto steps = [&](GradientBuckets& overlapped) {
    std::vector<double> step_t;
    for (int r = 0; r < reps + 3; ++r) {
      MPI_Barrier(comm.get());
      auto t0 = Clock::now();
      softmax_cross_entropy(net.forward_logits(x, true), labels.data(), batch * comm.size(), dlogits);
      net.backward(dlogits, [&](const std::vector<Param*>& ready) { overlapped.mark_ready(ready); });
      overlapped.finish();
      if (r >= 3) step_t.push_back(since(t0));
    }
    return std::make_pair(median(step_t), overlapped.hidden_share());
  };
  std::pair<double, double> mpi_steps, fixed_steps;
  {
    GradientBuckets overlapped(net.params(), comm, static_cast<std::size_t>(bucket_mib * (1 << 20)));
    mpi_steps = steps(overlapped);
  }
  comm.set_fixed_order_sums(true);
  {
    GradientBuckets overlapped(net.params(), comm, static_cast<std::size_t>(bucket_mib * (1 << 20)));
    fixed_steps = steps(overlapped);
  }
  comm.set_fixed_order_sums(false);
  const double hidden = mpi_steps.second;
  const std::vector<double> step_t{mpi_steps.first};
  if (comm.rank() == 0) {
    const double plain = median(plain_t), ours = median(ours_t);
    std::printf("ranks %d, gradients %lld floats (%.2f MB) in %zu bucket(s): %s bytes\n", comm.size(),
                static_cast<long long>(elements), elements * 4 / 1e6, buckets.bucket_count(),
                buckets.plan_signature().c_str());
    std::printf("%-34s %12s\n", "measure", "value");
    std::printf("%-34s %12.3f\n", "plain MPI_Allreduce (ms)", plain * 1e3);
    std::printf("%-34s %12.3f\n", "dlscale bucketed all-reduce (ms)", ours * 1e3);
    std::printf("%-34s %12.3f\n", "ratio dlscale / plain", ours / plain);
    std::printf("%-34s %12.3f\n", "training step (ms)", median(step_t) * 1e3);
    std::printf("%-34s %12.3f\n", "all-reduce share of the step", plain / median(step_t));
    std::printf("%-34s %12.2f\n", "share of gradient bytes hidden", hidden);
    std::printf("%-34s %12.3f\n", "deterministic: training step (ms)", fixed_steps.first * 1e3);
    std::printf("%-34s %12.2f\n", "deterministic: share hidden", fixed_steps.second);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return dlscale::bench::run_benchmark("allreduce_bench", run, argc, argv); }
