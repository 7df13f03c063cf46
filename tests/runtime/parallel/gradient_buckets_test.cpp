// Gradient buckets under mpirun -n 2: the plan (reverse order, 1 MiB first
// bucket, size cap), grads as views of the bucket buffers, and sums equal to
// a plain MPI_Allreduce, whether buckets start during backward or at finish.
#include <gtest/gtest.h>
#include <mpi.h>

#include "runtime/parallel/gradient_buckets.h"

namespace dlscale {
namespace {

std::vector<Param> make_params(const std::vector<std::int64_t>& sizes, DType dtype = DType::f32) {
  std::vector<Param> params;
  for (auto n : sizes) {
    Param p;
    p.name = "p" + std::to_string(params.size());
    p.value = Tensor({n}, dtype);
    p.grad = Tensor({n}, dtype);
    params.push_back(std::move(p));
  }
  return params;
}

std::vector<Param*> pointers(std::vector<Param>& params) {
  std::vector<Param*> out;
  for (auto& p : params) out.push_back(&p);
  return out;
}

TEST(GradientBuckets, PlanIsReverseOrderWithSmallFirstBucket) {
  Communicator comm;
  // floats: 4 B each. First cap 1000 B, then 2000 B.
  auto params = make_params({100, 300, 200, 100});  // 400, 1200, 800, 400 bytes
  GradientBuckets buckets(pointers(params), comm, 2000, 1000);
  // Reverse: p3 (400) + p2 (800) > 1000 → bucket {p3}; then p2 + p1 = 2000 → {p2, p1}; then {p0}.
  EXPECT_EQ(buckets.plan_signature(), "400,2000,400");
}

TEST(GradientBuckets, GradsAreViewsAndSumsMatchAllreduce) {
  Communicator comm;
  ASSERT_EQ(comm.size(), 2) << "run with mpirun -n 2";
  auto params = make_params({7, 33, 5, 64, 3});
  GradientBuckets buckets(pointers(params), comm, 64, 64);
  ASSERT_GT(buckets.bucket_count(), 2u);
  for (int step = 0; step < 3; ++step) {
    // Backward in reverse order, writing through each param's grad as layers do.
    std::vector<std::vector<float>> expected;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      float* g = it->grad.data<float>();
      for (std::int64_t i = 0; i < it->grad.numel(); ++i) g[i] = static_cast<float>((comm.rank() + 1) * (i + step));
      buckets.mark_ready({&*it});
    }
    buckets.finish();
    for (auto& p : params) {
      const float* g = p.grad.data<float>();
      // (1 + 2) × (i + step): the sum over both ranks, exactly.
      for (std::int64_t i = 0; i < p.grad.numel(); ++i) EXPECT_EQ(g[i], 3.0f * (i + step)) << p.name << " " << i;
    }
  }
}

TEST(GradientBuckets, FinishStartsBucketsBackwardDidNotReport) {
  Communicator comm;
  auto params = make_params({10, 10}, DType::f64);
  GradientBuckets buckets(pointers(params), comm, 1 << 20);
  for (auto& p : params)
    for (std::int64_t i = 0; i < 10; ++i) p.grad.set(i, 1.5);
  buckets.finish();  // no mark_ready at all (a frozen layer, say)
  for (auto& p : params)
    for (std::int64_t i = 0; i < 10; ++i) EXPECT_EQ(p.grad.at(i), 1.5 * comm.size());
}

// A gradient reported twice in one step would count for another that is not
// ready yet, and its bucket would be all-reduced while still being written.
TEST(GradientBuckets, AGradientReportedTwiceInOneStepIsAnError) {
  Communicator comm;
  auto params = make_params({8, 8});
  GradientBuckets buckets(pointers(params), comm, 64, 64);
  buckets.mark_ready({&params[1]});
  try {
    buckets.mark_ready({&params[1]});
    ADD_FAILURE() << "reporting p1 twice must be refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gradient of p1 was reported ready twice"), std::string::npos) << e.what();
  }
  buckets.mark_ready({&params[0]});
  buckets.finish();
  buckets.mark_ready({&params[1]});  // a new step: reported once again, fine
  buckets.finish();
}

// A step abandoned mid-backward (an exception unwinding through the trainer)
// leaves all-reduces in flight. MPI allows neither freeing nor cancelling an
// active collective request, and MPI may still write into the buffer, so the
// buckets' buffers must outlive them: here both ranks complete the pending
// reductions afterwards and the sums land in the kept buffers.
TEST(GradientBuckets, BucketsDestroyedMidStepKeepTheirBuffersForMpi) {
  Communicator comm;
  ASSERT_EQ(comm.size(), 2) << "run with mpirun -n 2";
  const std::size_t kept_before = GradientBuckets::abandoned_in_flight().size();
  {
    auto params = make_params({64, 64, 64});
    GradientBuckets buckets(pointers(params), comm, 256, 256);
    ASSERT_EQ(buckets.bucket_count(), 3u);
    // Backward reaches the last two params: the first two buckets start.
    for (int i : {2, 1}) {
      float* g = params[i].grad.data<float>();
      for (std::int64_t k = 0; k < 64; ++k) g[k] = static_cast<float>(comm.rank() + 1);
      buckets.mark_ready({&params[i]});
    }
  }  // destroyed with requests that may still be active
  auto& kept = GradientBuckets::abandoned_in_flight();
  EXPECT_LE(kept.size() - kept_before, 2u);
  // MPI goes on progressing the orphaned reductions inside later MPI calls and
  // writes their sums (1 + 2) into the kept buffers, which must still exist.
  auto summed = [&] {
    for (std::size_t b = kept_before; b < kept.size(); ++b)
      for (std::int64_t k = 0; k < kept[b].numel(); ++k)
        if (kept[b].data<float>()[k] != 3.0f) return false;
    return true;
  };
  double all_done = 0;
  for (int round = 0; round < 1000 && all_done < comm.size(); ++round) {
    all_done = summed() ? 1.0 : 0.0;
    comm.allreduce_sum(&all_done, 1);  // the communicator's later collectives still work
  }
  EXPECT_EQ(all_done, comm.size()) << "the orphaned reductions never completed into the kept buffers";
}

}  // namespace
}  // namespace dlscale
