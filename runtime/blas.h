// Row-major GEMM and thread control over OpenBLAS, typed for float and double.
#pragma once

#include <cstdint>

namespace dlscale {

// C (m×n) = alpha · op(A) · op(B) + beta · C, all row-major.
// op(A) is m×k (A is k×m when trans_a), op(B) is k×n (B is n×k when trans_b).
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          const T* b, T beta, T* c);

// Threads for BLAS and for the OpenMP loops of the CPU kernels.
void set_cpu_threads(int threads);
int cpu_threads();

}  // namespace dlscale
