// GEMM (oneDNN for float32 when built with it, else OpenBLAS; OpenBLAS for
// float64) and the one place that sets CPU thread counts.
#include "runtime/core/blas.h"

#include <cblas.h>
#include <malloc.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>

#include "runtime/core/gemm_onednn.h"

namespace dlscale {

namespace {
// DLSCALE_GEMM=openblas keeps float32 on OpenBLAS too (for comparisons, bench/).
bool openblas_requested() {
  static const bool requested = [] {
    const char* v = std::getenv("DLSCALE_GEMM");
    return v && !std::strcmp(v, "openblas");
  }();
  return requested;
}
}  // namespace

const char* float_gemm_backend() {
  return onednn_gemm_name() && !openblas_requested() ? onednn_gemm_name() : "OpenBLAS";
}

template <>
void gemm<float>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                 const float* b, float beta, float* c) {
  if (!openblas_requested() && onednn_sgemm(ta, tb, m, n, k, alpha, a, b, beta, c)) return;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

template <>
void gemm<double>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                  const double* b, double beta, double* c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, alpha, a,
              ta ? m : k, b, tb ? k : n, beta, c, n);
}

void set_cpu_threads(int threads) {
  // Every step allocates and frees the same large activation tensors. With
  // glibc's defaults blocks that large go back to the kernel when freed, so
  // each step took page faults and zeroed fresh pages again (measured on the
  // CNN: 457k page faults in 32 steps, 18% of the process's CPU time).
  // Serving blocks up to 32 MiB (glibc's maximum here) from the heap and
  // trimming it only past 256 MiB keeps that memory mapped between steps.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  if (threads < 1) threads = 1;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace dlscale
