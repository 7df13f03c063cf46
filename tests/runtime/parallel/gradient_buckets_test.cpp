// Gradient buckets under mpirun -n 2 and -n 3: the plan (reverse order, 1 MiB
// first bucket, size cap), grads as views of the bucket buffers, and sums
// equal to a plain MPI_Allreduce, whether buckets start during backward or at
// finish; the ranks reduce buckets with the algorithm dlscale chooses.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "runtime/parallel/gradient_buckets.h"
#include "runtime/parallel/mpi_env.h"

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

// 1 + 2 + ... + P: the sum over the ranks of what each writes, rank + 1.
float sum_of_rank_numbers(const Communicator& comm) { return comm.size() * (comm.size() + 1) / 2.0f; }

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
  // Bucket sizes that 2 and 3 ranks do not divide: the ring's uneven segments.
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
      // (1 + 2 + ... + P) × (i + step): the sum over the ranks, exactly.
      const float ranks_sum = sum_of_rank_numbers(comm);
      for (std::int64_t i = 0; i < p.grad.numel(); ++i)
        EXPECT_EQ(g[i], ranks_sum * (i + step)) << p.name << " " << i;
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
// buckets' buffers must outlive them: here the ranks complete the pending
// reductions afterwards and the sums land in the kept buffers.
TEST(GradientBuckets, BucketsDestroyedMidStepKeepTheirBuffersForMpi) {
  Communicator comm;
  const float ranks_sum = sum_of_rank_numbers(comm);
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
  // writes their sums (1 + ... + P) into the kept buffers, which must still exist.
  auto summed = [&] {
    for (std::size_t b = kept_before; b < kept.size(); ++b)
      for (std::int64_t k = 0; k < kept[b].numel(); ++k)
        if (kept[b].data<float>()[k] != ranks_sum) return false;
    return true;
  };
  double all_done = 0;
  for (int round = 0; round < 1000 && all_done < comm.size(); ++round) {
    all_done = summed() ? 1.0 : 0.0;
    comm.allreduce_sum(&all_done, 1);  // the communicator's later collectives still work
  }
  EXPECT_EQ(all_done, comm.size()) << "the orphaned reductions never completed into the kept buffers";
}

// test_main.cpp calls choose_mpi_defaults() before MPI_Init, as dlscale's
// main does: Open MPI must have taken the ring for in-place MPI_Iallreduce
// (read back through the MPI tool interface, where Open MPI lists its MCA
// variables), unless the environment chose otherwise before the test.
TEST(MpiDefaults, OpenMpiReducesBucketsInARing) {
  int provided = 0;
  ASSERT_EQ(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided), MPI_SUCCESS);
  int index = -1;
  ASSERT_EQ(MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index), MPI_SUCCESS)
      << "Open MPI's libnbc has no coll_libnbc_iallreduce_algorithm";
  MPI_T_cvar_handle handle;
  int count = 0;
  ASSERT_EQ(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count), MPI_SUCCESS);
  int value = -1;
  ASSERT_EQ(MPI_T_cvar_read(handle, &value), MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  EXPECT_EQ(std::to_string(value), std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm"));
  EXPECT_EQ(value, 1) << "OMPI_MCA_coll_libnbc_iallreduce_algorithm was set before the test";
}

TEST(MpiDefaults, AUsersChoiceIsKept) {
  const char* set_by_main = std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  ASSERT_NE(set_by_main, nullptr);
  const std::string before = set_by_main;
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3", 1);
  choose_mpi_defaults();
  EXPECT_STREQ(std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm"), "3");
  unsetenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm");
  choose_mpi_defaults();
  EXPECT_STREQ(std::getenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm"), "1");
  setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", before.c_str(), 1);
}

}  // namespace
}  // namespace dlscale
