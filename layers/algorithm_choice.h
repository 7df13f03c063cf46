// Choosing among a library's ranked algorithms (cuDNN's convolution
// algorithms, layers/conv2d.cu): the candidates that qualify, in the
// library's ranking order, are run once each until one succeeds. A candidate
// the heuristics offer can still fail when it runs (cuDNN's deterministic
// fp16/bf16 backward for 1-4 channels in NCHW), and it is passed over instead
// of ending the training. Plain C++, so CI tests the policy without a GPU.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/device_allocator.h"  // format_bytes

namespace dlscale {

// What was chosen: the candidate (nullptr: none ran), its workspace, and one
// sentence for the log naming it and every candidate that failed before it.
template <class Candidate>
struct AlgorithmChoice {
  const Candidate* chosen = nullptr;
  std::size_t workspace_bytes = 0;
  std::string said;
};

// candidates: (candidate, workspace bytes) in ranking order, already
// filtered by the rules (determinism, math type, workspace limit).
// run(candidate, bytes) returns "" when the candidate ran, else why not;
// name(candidate) names it in the sentence ("algorithm 1 (tensor-op math)").
template <class Candidate, class Run, class Name>
AlgorithmChoice<Candidate> first_that_runs(const std::vector<std::pair<const Candidate*, std::size_t>>& candidates,
                                           Run&& run, Name&& name) {
  AlgorithmChoice<Candidate> choice;
  std::string failed;
  for (const auto& [candidate, bytes] : candidates) {
    const std::string error = run(*candidate, bytes);
    if (error.empty()) {
      choice.chosen = candidate;
      choice.workspace_bytes = bytes;
      choice.said = name(*candidate) + ", workspace " + format_bytes(bytes) +
                    (failed.empty() ? "" : "; failed first: " + failed);
      return choice;
    }
    failed += (failed.empty() ? "" : ", ") + name(*candidate) + ": " + error;
  }
  choice.said = failed.empty() ? "no candidate qualified" : "every candidate failed: " + failed;
  return choice;
}

}  // namespace dlscale
