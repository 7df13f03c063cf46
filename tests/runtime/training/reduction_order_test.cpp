// Deterministic mode does not depend on MPI's all-reduce algorithm (#15 item
// 2, the one-host half of placement-independent determinism). Open MPI picks
// its algorithm by size, rank count and placement; here the same 4-rank
// float32 training (real ranks under mpirun, gradients in several buckets,
// some reduced during backward and one after it) runs with Open MPI forced
// to different algorithms for both the blocking all-reduce (coll/tuned) and
// the non-blocking one the buckets overlap with backward (coll/libnbc):
// recursive doubling, ring, Rabenseifner, linear/binomial and its default.
//  - deterministic = true: every model.h5 is byte for byte the same.
//  - deterministic = false: they are not all the same. This checks that the
//    test can see a difference at all: MPI's algorithms do round the sums
//    differently for this training, so the first check proves something.
#include <map>

#include "io/model_file.h"
#include "io/shard_writer.h"
#include "launch/cli_helpers.h"

namespace dlscale::testing {
namespace {

// name → environment forcing Open MPI's algorithms (ompi_info --param coll tuned|libnbc --level 9).
const std::map<std::string, std::string> kAlgorithms = {
    {"default", ""},
    {"recursive-doubling",
     "OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=3 "
     "OMPI_MCA_coll_libnbc_iallreduce_algorithm=4"},
    {"ring",
     "OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=4 "
     "OMPI_MCA_coll_libnbc_iallreduce_algorithm=1"},
    {"linear-binomial",
     "OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=1 "
     "OMPI_MCA_coll_libnbc_iallreduce_algorithm=2"},
    {"rabenseifner",
     "OMPI_MCA_coll_tuned_use_dynamic_rules=1 OMPI_MCA_coll_tuned_allreduce_algorithm=6 "
     "OMPI_MCA_coll_libnbc_iallreduce_algorithm=3"},
};

class ReductionOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = scratch_dir("reduction-order");
    write_dataset((dir / "train").string(), separable_images(512, 4, 3), 4);
    // About 25 KB of float32 gradients in 5 KiB buckets: five buckets
    // overlapped with backward (MPI_Iallreduce) and the last one after it.
    std::ofstream(dir / "run.ini") << "train-data = " << (dir / "train").string() << "\n"
                                   << "input = 1x8x8\nlayer = dense units=64\nlayer = relu\n"
                                      "layer = dense units=32\nlayer = tanh\nlayer = dense units=4\nlayer = softmax\n"
                                      "solver = adam\nmax-epochs = 2\nmini-batch-size = 32\nshuffle = every-epoch\n"
                                      "training-precision = single\ngradient-bucket-size = 0.005\n"
                                      "threads = 1\nverbose = false\nseed = 9\n";
  }
  // model.h5 of a 4-rank run with the given algorithms; fails the test when the run fails.
  std::string train(const std::string& algorithm, bool deterministic) const {
    const std::string run = algorithm + (deterministic ? "-det" : "-mpi");
    RunResult r = run_command(kAlgorithms.at(algorithm) + " timeout 300 mpirun -n 4 --oversubscribe " +
                                  dlscale_binary() + " train " + (dir / "run.ini").string() + " --deterministic " +
                                  (deterministic ? "true" : "false") + " --output " + (dir / run).string(),
                              dir);
    EXPECT_EQ(r.exit_code, 0) << run << ":\n" << r.out << r.err;
    return read_file(dir / run / "model.h5");
  }
  // The first tensor whose values differ, for the failure message.
  std::string first_difference(const std::string& a, const std::string& b) const {
    auto na = load_model((dir / a / "model.h5").string()), nb = load_model((dir / b / "model.h5").string());
    auto ta = na->named_tensors(), tb = nb->named_tensors();
    for (std::size_t k = 0; k < ta.size() && k < tb.size(); ++k)
      for (std::int64_t i = 0; i < ta[k].second->numel(); ++i)
        if (ta[k].second->at(i) != tb[k].second->at(i))
        {
          char line[160];
          std::snprintf(line, sizeof line, "%s[%ld]: %.9g vs %.9g", ta[k].first.c_str(), long(i), ta[k].second->at(i),
                        tb[k].second->at(i));
          return line;
        }
    return "no tensor value (file layout)";
  }
  fs::path dir;
};

TEST_F(ReductionOrder, DeterministicModelIsBitwiseTheSameWhateverAllreduceMpiUses) {
  const std::string reference = train("default", true);
  ASSERT_FALSE(reference.empty());
  for (const auto& [algorithm, env] : kAlgorithms) {
    if (algorithm == "default") continue;
    EXPECT_TRUE(train(algorithm, true) == reference)
        << "deterministic model.h5 with Open MPI's " << algorithm
        << " all-reduce differs from the default one: " << first_difference(algorithm + "-det", "default-det");
  }
}

TEST_F(ReductionOrder, WithoutTheFixedOrderMpisAlgorithmsGiveDifferentModels) {
  std::map<std::string, std::string> models;
  for (const auto& [algorithm, env] : kAlgorithms) models[algorithm] = train(algorithm, false);
  std::map<std::string, std::string> groups;  // model bytes → the algorithms that gave them
  for (const auto& [algorithm, bytes] : models)
    if (!bytes.empty()) groups[bytes] += (groups[bytes].empty() ? "" : " = ") + algorithm;
  const int distinct = static_cast<int>(groups.size());
  std::printf("non-deterministic mode: %d distinct model.h5 from %zu all-reduce algorithms:\n", distinct,
              models.size());
  for (const auto& [bytes, names] : groups) std::printf("  %s\n", names.c_str());
  EXPECT_GT(distinct, 1) << "MPI's algorithms all gave the same model: this training cannot show what the fixed "
                            "order fixes (make the gradients more order-sensitive)";
}

}  // namespace
}  // namespace dlscale::testing
