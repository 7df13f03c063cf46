// The oneDNN float32 GEMM behind gemm<float> (blas.h): gemm_onednn.cpp when
// CMake finds oneDNN, gemm_onednn_stub.cpp otherwise.
#pragma once

#include <cstdint>

namespace dlscale {

// C = alpha · op(A) · op(B) + beta · C, row-major as gemm<float>; false when
// this build has no oneDNN (the caller then uses OpenBLAS).
bool onednn_sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, float alpha,
                  const float* a, const float* b, float beta, float* c);
// "oneDNN", or null without it.
const char* onednn_gemm_name();

}  // namespace dlscale
