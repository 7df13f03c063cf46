// Row-major float32 GEMM through oneDNN (see blas.h). oneDNN threads with
// OpenMP, like the rest of the CPU kernels, so a training step runs on one
// thread pool: with OpenBLAS's own pthread pool beside OpenMP's, its idle
// workers spun in sched_yield while OpenMP loops ran (a fifth of the MLP's
// CPU time on 2 cores, measured with perf).
#include "runtime/core/gemm_onednn.h"

#include <oneapi/dnnl/dnnl.h>

#include "runtime/core/error.h"

namespace dlscale {

bool onednn_sgemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                  const float* b, float beta, float* c) {
  dnnl_status_t status = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, ta ? m : k, b, tb ? k : n, beta,
                                    c, n);
  if (status != dnnl_success)
    fail("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(status)) + ") for " + std::to_string(m) +
         "x" + std::to_string(n) + "x" + std::to_string(k));
  return true;
}

const char* onednn_gemm_name() { return "oneDNN"; }

}  // namespace dlscale
