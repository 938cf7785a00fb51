// e^x on 8 floats with AVX2/FMA (kernels/exp_poly.h), for the *_avx2.cpp
// files only (they are compiled with -mavx2 -mfma; nothing else may include
// this).
#pragma once
#include <immintrin.h>

#include "kernels/exp_poly.h"

namespace kvlab::kernels::avx2 {

struct Avx2Lanes {
  using F = __m256;
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }
  static F round(F x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // e * 2^n for whole n, 2^n as a float's exponent field.
  static F times_pow2(F e, F n) {
    return _mm256_mul_ps(
        e, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23)));
  }
};

[[gnu::always_inline]] inline __m256 exp8(__m256 x) { return exp_poly<Avx2Lanes>(x); }

}  // namespace kvlab::kernels::avx2
