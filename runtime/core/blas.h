// Row-major GEMM and thread control, typed for float and double: float32
// runs on oneDNN's GEMM when the build has oneDNN (one OpenMP thread pool for
// every CPU kernel), else on OpenBLAS; float64 always on OpenBLAS.
#pragma once

#include <cstdint>

namespace dlscale {

// C (m×n) = alpha · op(A) · op(B) + beta · C, all row-major.
// op(A) is m×k (A is k×m when trans_a), op(B) is k×n (B is n×k when trans_b).
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c);

// "oneDNN" or "OpenBLAS": what gemm<float> runs on (DLSCALE_GEMM=openblas
// in the environment picks OpenBLAS).
const char* float_gemm_backend();
// The OpenBLAS kernel family in use ("Haswell", "SkylakeX", ...; OPENBLAS_CORETYPE overrides it).
const char* openblas_core();

// Threads for BLAS and for the OpenMP loops of the CPU kernels.
void set_cpu_threads(int threads);
int cpu_threads();

}  // namespace dlscale
