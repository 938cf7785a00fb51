// AVX-512 prefill tiles for float weights (f32, f16, and bf16 on CPUs
// without AVX512_BF16; dot_bf16_avx512bf16.cpp serves those with it): a
// few weight rows against a few tokens with every accumulator in a
// register, so a weight vector is loaded (and for 16-bit rows widened) once
// per group of tokens and an activation vector once per group of rows. The
// AVX2 dot4 these replace runs one row against 4 tokens in 8-wide vectors,
// which on 16-bit rows spends 5 widenings and 5 loads on 4 multiply-adds;
// its pp512 on the default model's f16 and bf16 copies was 0.84x and 0.55x
// llama.cpp's on the Zen 4 VM (bench/vs-llamacpp, 2026-12-04).
//
// Every (row, token) result is the AVX2 dot's, bit for bit (dot_avx2.cpp;
// tests/unit/kernels_test.cpp), so a token's output still does not depend on
// its batch:
//   f32: a 16-lane vector is dot's two 8-lane chains (elements 16k..16k+7
//        and 16k+8..16k+15) side by side; the last whole 8 go into the low
//        half, then the halves are added, summed across and the scalar tail
//        added, all in dot's order.
//   f16, bf16: dot runs one 8-lane chain per pair; here a 16-lane vector
//        holds two rows' chains (low half row a, high half row b) against a
//        token's 8 activations broadcast to both halves.
// The activations come in as f32; for 16-bit formats they are the exact
// widening of the rounded row dot reads (matmul.cpp), so the products are
// the same numbers.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/float_tiles.h"

namespace kvlab::kernels::avx512 {
namespace {

// hsum_avx2.h's sum, the same additions in the same order, written out here
// rather than included: an inline function from that header built with
// AVX-512 enabled could be the copy the linker keeps for the AVX2 files.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// The zero-masked forms with every lane on are the plain operations; those
// start from _mm512_undefined_*, which GCC 12 reports as maybe uninitialized
// (its cast to the low half is an extract too).
inline __m256 low_half(__m512 v) { return _mm512_maskz_extractf32x8_ps(0xff, v, 0); }
inline __m256 high_half(__m512 v) { return _mm512_maskz_extractf32x8_ps(0xff, v, 1); }

// ---- f32 ----------------------------------------------------------------------
// NR rows against NT tokens (NR x NT accumulators; 4 x 6 fills 24 of the 32
// registers with room for the row vectors; 2 x 14, with twice the
// activation loads, ran pp512 on the f32 copy 0.75x as fast). Rows past
// n_rows repeat the last one and are not stored.
template <int NR, int NT>
void tile_f32(const float* const* w, const float* act, size_t act_stride, size_t n, size_t n_rows, float* y,
              size_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_loadu_ps(w[r] + i);
    for (int t = 0; t < NT; ++t) {
      const __m512 a = _mm512_loadu_ps(act + size_t(t) * act_stride + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], a, acc[r][t]);
    }
  }
  for (int r = 0; r < NR && size_t(r) < n_rows; ++r)
    for (int t = 0; t < NT; ++t) {
      const float* a = act + size_t(t) * act_stride;
      __m256 lo = low_half(acc[r][t]);
      size_t j = i;
      for (; j + 8 <= n; j += 8) lo = _mm256_fmadd_ps(_mm256_loadu_ps(w[r] + j), _mm256_loadu_ps(a + j), lo);
      float s = hsum8(_mm256_add_ps(lo, high_half(acc[r][t])));
      for (; j < n; ++j) s += w[r][j] * a[j];
      y[size_t(t) * y_stride + size_t(r)] = s;
    }
}

// ---- f16, bf16 -----------------------------------------------------------------
// 8 elements of row a, then 8 of row b.
inline __m256i two_rows(const uint16_t* a, const uint16_t* b) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a))),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i*>(b)), 1);
}
// H::pair(a, b): two_rows widened, row a in the low half, b in the high
// half; H::one: one element.
struct F16Rows {
  static __m512 pair(const uint16_t* a, const uint16_t* b) { return _mm512_maskz_cvtph_ps(0xffff, two_rows(a, b)); }
  static float one(uint16_t h) { return _cvtsh_ss(h); }
};
struct BF16Rows {
  static __m512 pair(const uint16_t* a, const uint16_t* b) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, two_rows(a, b)), 16));
  }
  static float one(uint16_t h) {
    const __m128i v = _mm_cvtsi32_si128(int(uint32_t(h) << 16));
    return _mm_cvtss_f32(_mm_castsi128_ps(v));
  }
};

// NP pairs of rows (2 x NP rows) against NT tokens: 2 x 14 accumulators, 28
// of the 32 registers (pp512 on the f16 copy: 603 tok/s with NT up to 8,
// 655 up to 12, 690 up to 14; single kvlab bench runs, Zen 4 VM).
template <class H, int NP, int NT>
void tile_16bit(const uint16_t* const* w, const float* act, size_t act_stride, size_t n, size_t n_rows, float* y,
                size_t y_stride) {
  __m512 acc[NP][NT];
  for (int p = 0; p < NP; ++p)
    for (int t = 0; t < NT; ++t) acc[p][t] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512 wv[NP];
    for (int p = 0; p < NP; ++p) wv[p] = H::pair(w[2 * p] + i, w[2 * p + 1] + i);
    for (int t = 0; t < NT; ++t) {
      const __m512 a = _mm512_maskz_broadcast_f32x8(0xffff, _mm256_loadu_ps(act + size_t(t) * act_stride + i));
      for (int p = 0; p < NP; ++p) acc[p][t] = _mm512_fmadd_ps(wv[p], a, acc[p][t]);
    }
  }
  for (int r = 0; r < 2 * NP && size_t(r) < n_rows; ++r)
    for (int t = 0; t < NT; ++t) {
      const float* a = act + size_t(t) * act_stride;
      float s = hsum8(r % 2 == 0 ? low_half(acc[r / 2][t]) : high_half(acc[r / 2][t]));
      for (size_t j = i; j < n; ++j) s += H::one(w[r][j]) * a[j];
      y[size_t(t) * y_stride + size_t(r)] = s;
    }
}

// FloatTile's activations are f32 here (tile_act).
void float_tile_f32(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows,
                    size_t n_tokens, size_t n, float* y, size_t y_stride) {
  for_each_float_tile<float, float, 4, 6>(
      w, w_stride, act, act_stride, n_rows, n_tokens, y, y_stride,
      [&]<int NT>(const float* const* rows, const float* a, size_t ld, size_t nr, float* yt) {
        tile_f32<4, NT>(rows, a, ld, n, nr, yt, y_stride);
      });
}

template <class H>
void float_tile_16bit(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows,
                      size_t n_tokens, size_t n, float* y, size_t y_stride) {
  for_each_float_tile<uint16_t, float, 4, 14>(
      w, w_stride, act, act_stride, n_rows, n_tokens, y, y_stride,
      [&]<int NT>(const uint16_t* const* rows, const float* a, size_t ld, size_t nr, float* yt) {
        tile_16bit<H, 2, NT>(rows, a, ld, n, nr, yt, y_stride);
      });
}

}  // namespace

FloatTile float_tile(tensor::DType w) {
  switch (w) {
    case tensor::DType::F32: return float_tile_f32;
    case tensor::DType::F16: return float_tile_16bit<F16Rows>;
    case tensor::DType::BF16: return float_tile_16bit<BF16Rows>;
    default: return nullptr;
  }
}

}  // namespace kvlab::kernels::avx512
