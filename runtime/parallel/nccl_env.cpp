#include "runtime/parallel/nccl_env.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include "runtime/core/error.h"

namespace dlscale {

std::string deterministic_nccl_algo(const char* user_value, int rank) {
  const std::string value = user_value ? user_value : "";
  if (value.empty()) return "Ring";
  const std::string why = "rank " + std::to_string(rank) + ": deterministic mode needs an NCCL all-reduce whose "
                          "reduction order is fixed, but NCCL_ALGO=" + value;
  if (value.front() == '^')
    fail(why + " leaves NCCL free to pick NVLS; unset NCCL_ALGO (deterministic mode then uses Ring) or name Ring");
  std::istringstream items(value);
  for (std::string item; std::getline(items, item, ',');) {
    std::transform(item.begin(), item.end(), item.begin(), [](unsigned char c) { return std::tolower(c); });
    if (item != "ring" && item != "tree" && item != "collnetdirect" && item != "collnetchain")
      fail(why + " names '" + item + "' (NVLS reduces inside the switch in no fixed order); unset NCCL_ALGO "
           "(deterministic mode then uses Ring) or name Ring");
  }
  return value;
}

void apply_deterministic_nccl_algo(int rank) {
  setenv("NCCL_ALGO", deterministic_nccl_algo(std::getenv("NCCL_ALGO"), rank).c_str(), 1);
}

}  // namespace dlscale
