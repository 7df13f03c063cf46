// Filesystem faults under a 2-rank job, injected by tests/faults/fault_shim.c:
// a checkpoint one rank cannot read (EIO) must not make ranks resume from
// different checkpoints, nor make rank 0 fall back to an older one; a
// checkpoint whose close fails (NFS reports deferred write errors there) is
// never committed.
#include <chrono>

#include "launch/cli_helpers.h"

namespace dlscale::testing {
namespace {

class FilesystemFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir(std::string("faults-") + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    write_dataset((dir / "train").string(), separable_images(800, 4, 1), 2);
    std::ofstream(dir / "run.ini") << "train-data = " << (dir / "train").string() << "\n"
                                   << "input = 1x8x8\nlayer = dense units=16\nlayer = relu\n"
                                      "layer = dense units=4\nlayer = softmax\n"
                                      "max-epochs = 2\nmini-batch-size = 16\nthreads = 1\nverbose = false\n"
                                      "checkpoint-frequency = 7\ncheckpoint-frequency-unit = iteration\n";
  }
  // faults: environment assignments for the shim ("" for none).
  RunResult train(const std::string& faults, const std::string& extra = "") const {
    const std::string preload = faults.empty() ? "" : "LD_PRELOAD=" + std::string(FAULT_SHIM) + " " + faults + " ";
    return run_command(preload + "timeout 120 mpirun -n 2 --oversubscribe " + dlscale_binary() + " train " +
                           (dir / "run.ini").string() + " --output " + (dir / "run").string() + " " + extra,
                       dir);
  }
  // A run stopped (as by a preemption signal) after iteration 20: checkpoints 7, 14 and 20.
  void stop_at_20() const {
    RunResult r = run_command("DLSCALE_STOP_AT=20 timeout 120 mpirun -n 2 --oversubscribe " + dlscale_binary() +
                                  " train " + (dir / "run.ini").string() + " --output " + (dir / "run").string(),
                              dir);
    ASSERT_EQ(r.exit_code, 3) << r.out << r.err;
    ASSERT_TRUE(fs::exists(checkpoints() / "ckpt-20.h5"));
  }
  fs::path checkpoints() const { return dir / "run" / "checkpoints"; }
  fs::path dir;
};

// Rank 1 alone cannot read the newest checkpoint. It used to skip it as
// "corrupt" and resume from ckpt-14 while rank 0 resumed from ckpt-20.
TEST_F(FilesystemFaults, CheckpointOneRankCannotReadEndsTheJobInsteadOfMixingWeights) {
  stop_at_20();
  RunResult r = train("DLSCALE_FAULT_RANK=1 DLSCALE_FAULT_OPEN_EIO=ckpt-20.h5", "--resume auto");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.exit_code, 124) << "the job hung";
  EXPECT_NE(r.err.find("dlscale: rank 1 ("), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("ckpt-20.h5"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "run" / "model.h5"));
  EXPECT_TRUE(fs::exists(checkpoints() / "ckpt-20.h5")) << "a readable checkpoint was moved or deleted";
}

// Rank 0 cannot read it: an I/O error is not a damaged file, so the run
// stops rather than resume from ckpt-14 and lose six iterations unsaid.
TEST_F(FilesystemFaults, CheckpointRank0CannotReadStopsTheResume) {
  stop_at_20();
  RunResult r = train("DLSCALE_FAULT_OPEN_EIO=ckpt-20.h5", "--resume auto");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.exit_code, 124) << "the job hung";
  EXPECT_NE(r.err.find("cannot open checkpoint " + (checkpoints() / "ckpt-20.h5").string() + ": Input/output error"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("not known to be damaged"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(checkpoints() / "ckpt-20.h5"));
  EXPECT_FALSE(fs::exists(checkpoints() / "set-aside"));
  // Once the filesystem is healthy again, the same command resumes from ckpt-20.
  RunResult healthy = train("", "--resume auto --verbose true");
  EXPECT_EQ(healthy.exit_code, 0) << healthy.out << healthy.err;
  EXPECT_NE(healthy.out.find("ckpt-20.h5 at iteration 20"), std::string::npos) << healthy.out;
}

// The close of a checkpoint fails: it is never renamed into place, and the
// checkpoints before it stay.
TEST_F(FilesystemFaults, CheckpointWhoseCloseFailsIsNotCommitted) {
  stop_at_20();
  RunResult r = train("DLSCALE_FAULT_CLOSE_EIO=ckpt-21.h5.tmp", "--resume auto");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.exit_code, 124) << "the job hung";
  EXPECT_NE(r.err.find("cannot finish writing " + (checkpoints() / "ckpt-21.h5.tmp").string()), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(checkpoints() / "ckpt-21.h5"));
  EXPECT_FALSE(fs::exists(checkpoints() / "ckpt-21.h5.tmp"));
  for (const char* kept : {"ckpt-7.h5", "ckpt-14.h5", "ckpt-20.h5"}) EXPECT_TRUE(fs::exists(checkpoints() / kept));
}

}  // namespace
}  // namespace dlscale::testing
