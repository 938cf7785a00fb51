// The sum of a vector's 8 floats, always the same additions in the same
// order, so a result does not depend on the caller. For files built with
// -mavx2 or more (*_avx2.cpp, *_avx512*.cpp). The functions are static: each
// file gets its own copy, built with its own flags, where an inline one
// built with AVX-512 enabled could be the copy the linker keeps for the
// AVX2 files.
#pragma once
#include <immintrin.h>

namespace kvlab::kernels {

static inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

#ifdef __AVX512F__
// A 16-lane vector's halves, and the sum of its 16 floats: the halves added,
// then hsum. The zero-masked forms with every lane on are the plain
// operations; those start from _mm512_undefined_*, which GCC 12 reports as
// maybe uninitialized (its cast to the low half is an extract too).
static inline __m256 low_half(__m512 v) { return _mm512_maskz_extractf32x8_ps(0xff, v, 0); }
static inline __m256 high_half(__m512 v) { return _mm512_maskz_extractf32x8_ps(0xff, v, 1); }
static inline float hsum(__m512 v) { return hsum(_mm256_add_ps(low_half(v), high_half(v))); }
#endif

}  // namespace kvlab::kernels
