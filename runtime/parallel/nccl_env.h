// NCCL's environment as deterministic mode needs it. NCCL picks its
// all-reduce algorithm per message size and topology; NVLS (and NVLSTree)
// reduce inside the NVSwitch, in an order that is not fixed, so two runs on
// an H100/H200 node could differ in the last bits. Ring's order is fixed by
// the ranks' order (Megatron's deterministic mode makes the same choice).
// Host code: read before the NCCL communicator is created.
#pragma once

#include <string>

namespace dlscale {

// The NCCL_ALGO deterministic mode runs with, given the one the user set
// (null or empty: none): "Ring" when unset, the user's value when it names
// only algorithms with a fixed order (Ring, Tree, CollnetDirect,
// CollnetChain); anything else (NVLS, NVLSTree, an exclusion list "^...")
// is an error naming NCCL_ALGO and the rank.
std::string deterministic_nccl_algo(const char* user_value, int rank);

// Sets NCCL_ALGO in this process's environment to deterministic_nccl_algo().
void apply_deterministic_nccl_algo(int rank);

}  // namespace dlscale
