// Shared GoogleTest main: MPI is initialized for every test binary because the
// library's communicator and the trainer expect it, even with one rank.
// Rank 0 prints the usual report; other ranks print only their failures,
// prefixed with their rank, so a failure on any rank is visible. All ranks
// share one scratch root (scratch.h), made by rank 0 and removed by it once
// every rank passed.
#include <gtest/gtest.h>
#include <mpi.h>
#ifdef __SANITIZE_ADDRESS__  // GCC and clang, with -fsanitize=address
#include <sanitizer/lsan_interface.h>
#define DLSCALE_LEAK_CHECK_BEFORE_FINALIZE 1
#endif

#include <cstdio>
#include <string>

#include "runtime/parallel/mpi_env.h"
#include "scratch.h"

namespace {

class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  // The name is kept here: asking UnitTest for it inside OnTestPartResult
  // deadlocks on gtest's own mutex.
  void OnTestStart(const ::testing::TestInfo& info) override {
    name_ = std::string(info.test_suite_name()) + "." + info.name();
  }
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] FAILED %s at %s:%d\n%s\n", rank_, name_.c_str(),
                 r.file_name() ? r.file_name() : "", r.line_number(), r.summary());
  }

 private:
  int rank_;
  std::string name_;
};

}  // namespace

int main(int argc, char** argv) {
  dlscale::choose_mpi_defaults();  // the tests' ranks run MPI as dlscale's do
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(rank));
  }
  char root[4096] = "";
  if (rank == 0) std::snprintf(root, sizeof root, "%s", dlscale::testing::make_scratch_root().c_str());
  MPI_Bcast(root, sizeof root, MPI_CHAR, 0, MPI_COMM_WORLD);
  dlscale::testing::use_scratch_root(root, false);
  int failed = RUN_ALL_TESTS();
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#ifdef DLSCALE_LEAK_CHECK_BEFORE_FINALIZE
  // The address lane's leak check runs here, not at exit: Debian's Open MPI
  // 4.1 unloads its components in MPI_Finalize (it has no parameter to keep
  // them), after which their allocations show "<unknown module>" frames
  // that no suppression by library name can match. Everything the tests
  // allocated and dropped is unreachable by now all the same.
  __lsan_do_leak_check();
#endif
  MPI_Finalize();
  if (rank == 0) dlscale::testing::finish_scratch_root(root, any_failed == 0);
  return any_failed;
}
