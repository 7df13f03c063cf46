// OpenBLAS-backed GEMM and the one place that sets CPU thread counts.
#include "runtime/blas.h"

#include <cblas.h>
#include <omp.h>

namespace dlscale {

template <>
void gemm<float>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                 const float* b, float beta, float* c) {
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
  if (threads < 1) threads = 1;
  omp_set_num_threads(threads);
  openblas_set_num_threads(threads);
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace dlscale
