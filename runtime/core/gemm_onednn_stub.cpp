// Builds without oneDNN: every GEMM goes to OpenBLAS.
#include "runtime/core/gemm_onednn.h"

namespace dlscale {

bool onednn_sgemm(bool, bool, std::int64_t, std::int64_t, std::int64_t, float, const float*, const float*, float,
                  float*) {
  return false;
}

const char* onednn_gemm_name() { return nullptr; }

}  // namespace dlscale
