// erf and exp for float32 elementwise loops, in additions, multiplications,
// one division and bit operations only: no libm call, so a loop over them
// vectorizes (std::erf and std::exp are one libm call per element), and
// every lane rounds as a scalar would, so the results do not depend on the
// vector width, the alignment or the thread count (deterministic mode).
// The GELU layer's erf and exp took 39 % of the example transformer's CPU
// time through libm (perf). Loops that use them need -fno-trapping-math
// for GCC to vectorize the clamps (layers/CMakeLists.txt or the top one).
// Errors, measured against double (tests/layers/activations_test.cpp):
// erf_float at most 4.3e-7 absolute (libm's erff: 5e-8), exp_float at most
// 1e-7 relative (libm's expf: 6e-8).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

namespace dlscale {

// erf(x): the rational approximation Eigen uses for float (odd numerator of
// degree 13 over even denominator of degree 8 in x), on x clamped to
// [-4, 4], beyond which erf is ±1 in float.
inline float erf_float(float x) {
  x = std::min(std::max(x, -4.0f), 4.0f);
  const float x2 = x * x;
  float p = -2.72614225801306e-10f;
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  float q = -1.45660718464996e-05f;
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

// exp(x) as Cephes' expf: x = n·ln 2 + r with |r| <= ln 2 / 2 (ln 2 split in
// two parts for an exact reduction), exp(r) by a degree-6 polynomial, 2^n
// from the exponent bits. x is clamped to [-87, 88], where 2^n stays a
// normal float: below, the result is exp(-87) ≈ 1.6e-38 instead of a
// smaller denormal or 0.
inline float exp_float(float x) {
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float t = x * 1.44269504088896341f;
  const std::int32_t n = static_cast<std::int32_t>(t + std::copysign(0.5f, t));  // round to nearest
  const float fn = static_cast<float>(n);
  const float r = (x - fn * 0.693359375f) - fn * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return (p * (r * r) + r + 1.0f) * std::bit_cast<float>((n + 127) << 23);
}

}  // namespace dlscale
