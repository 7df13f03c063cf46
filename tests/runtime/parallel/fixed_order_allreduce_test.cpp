// The fixed-order all-reduce under mpirun -n 4: every element must be
// bitwise the rank-order sum (((x0 + x1) + x2) + x3), computed here from the
// values every rank can regenerate. The values span 16 orders of magnitude
// with random signs, so other orders (MPI's ring, recursive doubling, or the
// reverse) round differently; the tests check that they do, or they would
// prove nothing. Sizes are uneven (not a multiple of 4, fewer elements than
// ranks), several reductions are in flight at once, and the Communicator's
// sums and GradientBuckets use the same order in deterministic mode.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "runtime/parallel/fixed_order_allreduce.h"
#include "runtime/parallel/gradient_buckets.h"

namespace dlscale {
namespace {

constexpr int kRanks = 4;

std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Rank r's value at element i of reduction `salt`: any rank can compute any
// other's. A mantissa in [1, 2), a power of ten from 1e-8 to 1e7, a sign.
double value(int rank, std::int64_t i, int salt) {
  const std::uint64_t h = splitmix((static_cast<std::uint64_t>(salt) << 40) ^ (static_cast<std::uint64_t>(i) << 4) ^
                                   static_cast<std::uint64_t>(rank));
  static const double powers[16] = {1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1,
                                    1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7};
  const double v = (1.0 + double(h >> 11 & 0xfffffffffULL) / double(1ULL << 36)) * powers[(h >> 1) & 15];
  return (h & 1) ? -v : v;
}

template <class T>
T rank_order_sum(std::int64_t i, int salt) {
  T s = static_cast<T>(value(0, i, salt));
  for (int r = 1; r < kRanks; ++r) s += static_cast<T>(value(r, i, salt));
  return s;
}

template <class T>
T reverse_order_sum(std::int64_t i, int salt) {
  T s = static_cast<T>(value(kRanks - 1, i, salt));
  for (int r = kRanks - 2; r >= 0; --r) s += static_cast<T>(value(r, i, salt));
  return s;
}

template <class T>
Tensor my_values(std::int64_t n, int rank, int salt) {
  Tensor t({n}, dtype_of<T>());
  for (std::int64_t i = 0; i < n; ++i) t.data<T>()[i] = static_cast<T>(value(rank, i, salt));
  return t;
}

// Counts elements equal bitwise to the rank-order sum, and those where the
// reverse order would have rounded differently (the values' sensitivity).
template <class T>
void expect_rank_order(const Tensor& t, int salt, const std::string& what) {
  std::int64_t wrong = 0, order_sensitive = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const T want = rank_order_sum<T>(i, salt);
    if (std::memcmp(&t.data<T>()[i], &want, sizeof(T)) != 0) ++wrong;
    if (reverse_order_sum<T>(i, salt) != want) ++order_sensitive;
  }
  EXPECT_EQ(wrong, 0) << what << ": elements not bitwise the rank-order sum";
  if (t.numel() >= 1000) EXPECT_GT(order_sensitive, t.numel() / 20) << what << ": the values do not depend on order";
}

class FixedOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    int size = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    ASSERT_EQ(size, kRanks) << "run with mpirun -n 4";
  }
  int rank = 0;
};

TEST_F(FixedOrder, EveryElementIsTheRankOrderSum) {
  Communicator comm;
  int salt = 0;
  for (std::int64_t n : {std::int64_t(0), std::int64_t(1), std::int64_t(3), std::int64_t(4), std::int64_t(4097),
                         std::int64_t(100003)}) {
    ++salt;
    Tensor f = my_values<float>(n, rank, salt), d = my_values<double>(n, rank, salt);
    FixedOrderAllreduce sum_f(comm.get(), 10), sum_d(comm.get(), 20);
    sum_f.start(f);
    sum_d.start(d);  // two in flight at once, told apart by their tags
    while (!(sum_f.test() & sum_d.test())) {
    }
    expect_rank_order<float>(f, salt, "float32, " + std::to_string(n) + " elements");
    expect_rank_order<double>(d, salt, "float64, " + std::to_string(n) + " elements");
    // Reused for the next sum, as a bucket's reduction is every step.
    Tensor again = my_values<float>(n, rank, salt);
    sum_f.start(again);
    sum_f.wait();
    expect_rank_order<float>(again, salt, "float32 again");
  }
}

TEST_F(FixedOrder, CommunicatorSumsAreRankOrderInDeterministicMode) {
  Communicator comm;
  comm.set_fixed_order_sums(true);
  double scalars[3] = {value(rank, 0, 7), value(rank, 1, 7), value(rank, 2, 7)};
  comm.allreduce_sum(scalars, 3);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(scalars[k], rank_order_sum<double>(k, 7)) << "scalar " << k;
  Tensor t = my_values<float>(5003, rank, 8);
  comm.allreduce_sum(t);
  expect_rank_order<float>(t, 8, "Communicator::allreduce_sum(Tensor&)");
}

// Buckets started during backward (overlapped) and at finish() alike.
TEST_F(FixedOrder, GradientBucketsSumInRankOrderInDeterministicMode) {
  Communicator comm;
  comm.set_fixed_order_sums(true);
  std::vector<Param> params(5);
  const std::int64_t sizes[5] = {1001, 3, 2500, 77, 1800};
  std::vector<Param*> pointers;
  for (int k = 0; k < 5; ++k) {
    params[k].name = "p" + std::to_string(k);
    params[k].value = Tensor({sizes[k]});
    params[k].grad = Tensor({sizes[k]});
    pointers.push_back(&params[k]);
  }
  GradientBuckets buckets(pointers, comm, 8000, 4000);
  ASSERT_GE(buckets.bucket_count(), 3u);
  for (int step = 0; step < 3; ++step) {
    for (int k = 4; k >= 0; --k) {  // backward order
      for (std::int64_t i = 0; i < sizes[k]; ++i)
        params[k].grad.data<float>()[i] = static_cast<float>(value(rank, i, 100 * step + k));
      buckets.mark_ready({&params[k]});
    }
    buckets.finish();
    for (int k = 0; k < 5; ++k) expect_rank_order<float>(params[k].grad, 100 * step + k, params[k].name);
  }
}


// Destroyed in flight, as when wait() throws: the peers' messages arrive
// after it all the same, and must land in memory the reduction kept, not in
// memory handed out again. Without the keep, the scratch freed here is what
// the next allocation of its size gets back (glibc's tcache), and the late
// pieces overwrite it; in the address lane they are a use after free.
TEST_F(FixedOrder, DestroyedInFlightKeepsWhatLateMessagesLandIn) {
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  constexpr std::int64_t kChunk = 64;  // doubles of each rank's chunk
  constexpr int kTag = 40;
  constexpr std::size_t kScratchBytes = kChunk * sizeof(double) * kRanks;
  Tensor t = my_values<double>(kChunk * kRanks, rank, 9);
  std::vector<char>* reused = nullptr;
  if (rank == 0) {
    try {
      FixedOrderAllreduce sum(comm, kTag);
      sum.start(t);  // receives posted for every peer's piece of chunk 0
      throw std::runtime_error("wait() failed");
    } catch (const std::runtime_error&) {
    }
    reused = new std::vector<char>(kScratchBytes, 0x5a);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank != 0) {
    // Rank 0's piece of this rank's chunk, then this rank's piece of chunk 0: late.
    std::vector<double> piece(kChunk);
    MPI_Recv(piece.data(), kChunk, MPI_DOUBLE, 0, kTag, comm, MPI_STATUS_IGNORE);
    std::fill(piece.begin(), piece.end(), 1.0);
    MPI_Send(piece.data(), kChunk, MPI_DOUBLE, 0, kTag, comm);
  }
  MPI_Barrier(MPI_COMM_WORLD);  // rank 0's progress delivers the late pieces
  if (rank == 0) {
    std::size_t changed = 0;
    for (char c : *reused) changed += c != 0x5a;
    EXPECT_EQ(changed, 0u) << "late messages wrote into memory allocated after the reduction was destroyed";
    delete reused;
  }
}

}  // namespace
}  // namespace dlscale
