// e^x on 8 floats with AVX2/FMA, for the *_avx2.cpp files only (they are
// compiled with -mavx2 -mfma; nothing else may include this).
//
// x is clamped to [-87, 88], so the result is a normal float (e^-87 to
// e^88, below FLT_MAX). x = n·ln2 + r with |r| <= ln2/2 (Cody-Waite: ln2 in
// a short high part and a correction), e^r by its Taylor series to r^6
// (relative error < 2e-7 on that range), times 2^n built in the exponent
// field.
#pragma once
#include <immintrin.h>

namespace kvlab::kernels::avx2 {

inline __m256 exp8(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 e = _mm256_set1_ps(1.0f / 720);
  e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 120));
  e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 24));
  e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f / 6));
  e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(0.5f));
  e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f));
  e = _mm256_fmadd_ps(e, r, _mm256_set1_ps(1.0f));
  const __m256i pow2n = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(e, _mm256_castsi256_ps(pow2n));
}

}  // namespace kvlab::kernels::avx2
