// GEMM (oneDNN for float32 when built with it, else OpenBLAS; OpenBLAS for
// float64, single-threaded calls split over OpenMP's threads) and the one
// place that sets CPU thread counts.
#include "runtime/core/blas.h"

#include <cblas.h>
#include <malloc.h>
#include <omp.h>

#include <algorithm>
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

// OpenBLAS runs single-threaded and its GEMMs are split over OpenMP's
// threads here, so that every CPU kernel shares one thread pool: Debian's
// OpenBLAS has its own pthread pool, whose threads lost the cores to OpenMP
// threads spin-waiting after a loop (float64 MLP training 2x slower with a
// 0.3 ms spin), and without any spin every OpenMP loop paid a futex wake-up.
// Each thread computes a band of C's rows (or columns, when C is wider than
// tall) with the full k: every element is OpenBLAS's own sum over k, in the
// order it uses alone. call(rows, cols, a, b, c) runs one band.
template <class T, class Call>
void openblas_on_openmp(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* b,
                        T* c, Call call) {
  const int threads = omp_in_parallel() ? 1 : cpu_threads();
  if (threads == 1 || m * n * k < (std::int64_t{1} << 18)) return call(m, n, a, b, c);
  const bool by_rows = m >= n;
  const std::int64_t extent = by_rows ? m : n;
  // Bands in multiples of 8 rows or columns (the width of OpenBLAS's micro-tiles).
  const std::int64_t band = (extent / threads + 7) / 8 * 8;
#pragma omp parallel for num_threads(threads) schedule(static, 1)
  for (int t = 0; t < threads; ++t) {
    const std::int64_t start = t * band, size = std::min(band, extent - start);
    if (size <= 0) continue;
    if (by_rows)  // rows start..: A's rows (its columns when transposed) and C's rows
      call(size, n, ta ? a + start : a + start * k, b, c + start * n);
    else  // columns start..: B's columns (its rows when transposed) and C's columns
      call(m, size, a, tb ? b + start * k : b + start, c + start);
  }
}
}  // namespace

const char* float_gemm_backend() {
  return onednn_gemm_name() && !openblas_requested() ? onednn_gemm_name() : "OpenBLAS";
}

template <>
void gemm<float>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                 const float* b, float beta, float* c) {
  if (!openblas_requested() && onednn_sgemm(ta, tb, m, n, k, alpha, a, b, beta, c)) return;
  openblas_on_openmp(ta, tb, m, n, k, a, b, c, [&](std::int64_t bm, std::int64_t bn, const float* ba, const float* bb,
                                                 float* bc) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bm, bn, k, alpha, ba,
                ta ? m : k, bb, tb ? k : n, beta, bc, n);
  });
}

template <>
void gemm<double>(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
                  const double* b, double beta, double* c) {
  openblas_on_openmp(ta, tb, m, n, k, a, b, c, [&](std::int64_t bm, std::int64_t bn, const double* ba,
                                                 const double* bb, double* bc) {
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, bm, bn, k, alpha, ba,
                ta ? m : k, bb, tb ? k : n, beta, bc, n);
  });
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
  openblas_set_num_threads(1);  // OpenBLAS's GEMMs are split over OpenMP's threads (openblas_on_openmp)
}

int cpu_threads() { return omp_get_max_threads(); }

}  // namespace dlscale
