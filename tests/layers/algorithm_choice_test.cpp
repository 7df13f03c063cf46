// The policy conv2d (GPU) uses to pick a cuDNN algorithm, without a GPU:
// ranked qualifying candidates are run in order and the first that runs wins;
// one that fails is passed over and named in the plan's log line.
#include <gtest/gtest.h>

#include "layers/algorithm_choice.h"

namespace dlscale {
namespace {

struct FakeAlgorithm {
  int algo;
  bool runs;  // what the fake library answers when it is run
};

std::string name(const FakeAlgorithm& a) { return "algorithm " + std::to_string(a.algo); }

TEST(AlgorithmChoice, TheFirstCandidateThatRunsIsChosenAndTheFailedOnesAreNamed) {
  const FakeAlgorithm ranked[] = {{6, false}, {1, true}, {0, true}};
  const std::vector<std::pair<const FakeAlgorithm*, std::size_t>> candidates = {
      {&ranked[0], 4096}, {&ranked[1], 1024}, {&ranked[2], 0}};
  std::vector<int> tried;
  auto run = [&](const FakeAlgorithm& a, std::size_t) {
    tried.push_back(a.algo);
    return a.runs ? std::string() : std::string("CUDNN_STATUS_NOT_SUPPORTED");
  };
  const auto choice = first_that_runs(candidates, run, name);
  ASSERT_NE(choice.chosen, nullptr);
  EXPECT_EQ(choice.chosen->algo, 1);
  EXPECT_EQ(choice.workspace_bytes, 1024u) << "the chosen candidate's workspace, not the failed one's";
  EXPECT_EQ(tried, (std::vector<int>{6, 1})) << "nothing after the first success runs";
  EXPECT_NE(choice.said.find("algorithm 1, workspace"), std::string::npos) << choice.said;
  EXPECT_NE(choice.said.find("failed first: algorithm 6: CUDNN_STATUS_NOT_SUPPORTED"), std::string::npos)
      << choice.said;
}

TEST(AlgorithmChoice, TheFastestIsTakenWhenItRuns) {
  const FakeAlgorithm ranked[] = {{2, true}, {1, true}};
  const std::vector<std::pair<const FakeAlgorithm*, std::size_t>> candidates = {{&ranked[0], 0}, {&ranked[1], 0}};
  const auto choice = first_that_runs(candidates, [](const FakeAlgorithm&, std::size_t) { return std::string(); }, name);
  ASSERT_NE(choice.chosen, nullptr);
  EXPECT_EQ(choice.chosen->algo, 2);
  EXPECT_EQ(choice.said.find("failed"), std::string::npos) << choice.said;
}

TEST(AlgorithmChoice, NoneRunningOrNoneQualifyingIsSaidPlainly) {
  const FakeAlgorithm ranked[] = {{3, false}, {4, false}};
  const std::vector<std::pair<const FakeAlgorithm*, std::size_t>> candidates = {{&ranked[0], 0}, {&ranked[1], 0}};
  auto run = [](const FakeAlgorithm& a, std::size_t) { return a.runs ? std::string() : std::string("failed"); };
  const auto none = first_that_runs(candidates, run, name);
  EXPECT_EQ(none.chosen, nullptr);
  EXPECT_EQ(none.said, "every candidate failed: algorithm 3: failed, algorithm 4: failed");
  const auto empty = first_that_runs(std::vector<std::pair<const FakeAlgorithm*, std::size_t>>{}, run, name);
  EXPECT_EQ(empty.chosen, nullptr);
  EXPECT_EQ(empty.said, "no candidate qualified");
}

}  // namespace
}  // namespace dlscale
