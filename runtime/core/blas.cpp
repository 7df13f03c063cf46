// GEMM (oneDNN for float32 when built with it, else OpenBLAS; OpenBLAS for
// float64, single-threaded calls split over OpenMP's threads) and the one
// place that sets CPU thread counts.
#include "runtime/core/blas.h"

#include <cblas.h>
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
// C is cut into bands of rows (or columns, when C is wider than tall), each
// computed by one OpenBLAS call with the full k.
//
// The bands depend on the matrix shape only, never on the thread count:
// threads take whole bands in turn. An element's bits depend on the shape of
// the call that computes it (OpenBLAS's SkylakeX kernels take another path
// for small calls than for large ones), so bands sized by the thread count
// gave other bits at 1 and 2 threads there; and the old band formula,
// (extent / threads + 7) / 8 * 8, left the last rows unwritten whenever it
// rounded down (m = n = 17 on 2 threads: 17 of 289 elements never computed).
constexpr std::int64_t kMinBand = 16, kMaxBand = 256;  // multiples of 8, OpenBLAS's micro-tile width
constexpr std::int64_t kBandsWanted = 32;              // enough bands for 32 threads on large matrices

// Rows (or columns) per band for an extent: about extent / 32, a multiple of
// 8 within [16, 256]. A function of the extent alone.
std::int64_t band_size(std::int64_t extent) {
  const std::int64_t per_band = (extent + kBandsWanted - 1) / kBandsWanted;
  return std::clamp((per_band + 7) / 8 * 8, kMinBand, kMaxBand);
}

// call(rows, cols, a, b, c) runs one band.
template <class T, class Call>
void openblas_on_openmp(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const T* a, const T* b,
                        T* c, Call call) {
  if (m * n * k < (std::int64_t{1} << 18)) return call(m, n, a, b, c);  // too small to split, at any thread count
  const bool by_rows = m >= n;
  const std::int64_t extent = by_rows ? m : n;
  const std::int64_t band = band_size(extent);
  const std::int64_t bands = (extent + band - 1) / band;
  const int threads = omp_in_parallel() ? 1 : static_cast<int>(std::min<std::int64_t>(cpu_threads(), bands));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < bands; ++i) {
    const std::int64_t start = i * band, size = std::min(band, extent - start);
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
  if (threads < 1) threads = 1;
  omp_set_num_threads(threads);
  openblas_set_num_threads(1);  // OpenBLAS's GEMMs are split over OpenMP's threads (openblas_on_openmp)
}

int cpu_threads() { return omp_get_max_threads(); }

const char* openblas_core() { return openblas_get_corename(); }

}  // namespace dlscale
