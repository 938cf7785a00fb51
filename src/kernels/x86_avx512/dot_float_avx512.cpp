// AVX-512 kernels for float weights: the f32 prefill tile, and the f16
// (and, on CPUs without AVX512_BF16, bf16) dot products and prefill tile.
// dot_bf16_avx512bf16.cpp has the bf16 set for CPUs with AVX512_BF16.
//
// The tiles multiply a few weight rows against a few tokens with every
// accumulator in a register, so a weight vector is loaded (and for 16-bit
// rows widened) once per group of tokens and an activation vector once per
// group of rows. The AVX2 dot4 they replace runs one row against 4 tokens
// in 8-wide vectors, which on 16-bit rows spends 5 widenings and 5 loads on
// 4 multiply-adds, and its prefill on the float copies of a model ran
// slower than llama.cpp's (bench/vs-llamacpp -m <copy> compares them).
//
// Every (row, token) result comes from one chain of operations, the same in
// the set's dot, dot4 and tile, so a token's output does not depend on its
// batch (tests/unit/kernels_test.cpp):
//   f32: the AVX2 dot's (dot_avx2.cpp), whose two 8-lane chains (elements
//        16k..16k+7 and 16k+8..16k+15) are a 16-lane vector's halves; the
//        last whole 8 go into the low half, then the halves are added,
//        summed across and the scalar tail added, all in dot's order.
//   f16, bf16: 16 lanes from zero, 16 elements a step, widened and
//        multiplied in; the last step loads the elements past n as zeros;
//        then the halves are added and summed across in hsum's order. The
//        AVX2 dot runs one 8-lane chain, which waits on the multiply-add's
//        latency: decode on the f16 copy reads about 2/3 of the GB/s of
//        f32's two chains (bench/bytes-per-weight).
// The tiles take f32 activations (tile_act): for 16-bit formats the exact
// widening of the rounded rows dot reads (matmul.cpp), so the products are
// the same numbers.
#include <immintrin.h>

#include <array>
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/float_tiles.h"
#include "kernels/row_prefetch.h"
#include "kernels/x86_avx2/hsum_avx2.h"

namespace kvlab::kernels::avx512 {
namespace {

using tensor::DType;

// ---- f32 ----------------------------------------------------------------------
// NR rows against NT tokens (NR x NT accumulators; 4 x 6 fills 24 of the 32
// registers with room for the row vectors; 2 x 14, with twice the
// activation loads, ran pp512 on the f32 copy 0.75x as fast). Rows past
// n_rows repeat the last one and are not stored.
template <int NR, int NT>
void tile_f32(const float* const* w, const float* const* act, size_t n, size_t n_rows, float* y, size_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = _mm512_loadu_ps(w[r] + i);
    for (int t = 0; t < NT; ++t) {
      const __m512 a = _mm512_loadu_ps(act[t] + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], a, acc[r][t]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      const float* a = act[t];
      __m256 lo = low_half(acc[r][t]);
      size_t j = i;
      for (; j + 8 <= n; j += 8) lo = _mm256_fmadd_ps(_mm256_loadu_ps(w[r] + j), _mm256_loadu_ps(a + j), lo);
      float s = hsum(_mm256_add_ps(lo, high_half(acc[r][t])));
      for (; j < n; ++j) s += w[r][j] * a[j];
      if (size_t(r) < n_rows) y[size_t(t) * y_stride + size_t(r)] = s;
    }
}

void float_tile_f32(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows,
                    size_t n_tokens, size_t n, float* y, size_t y_stride) {
  for_each_float_tile<float, float, 4, 6>(
      w, w_stride, act, act_stride, n_rows, n_tokens, y, y_stride,
      [&]<int NT>(const float* const* rows, const float* const* tokens, size_t nr, float* yt) {
        tile_f32<4, NT>(rows, tokens, n, nr, yt, y_stride);
      });
}

// ---- f16, bf16 -----------------------------------------------------------------
// 16 elements widened to f32: all of them, or those whose mask bit is set
// (the others read as zero).
struct F16Lanes {
  using T = uint16_t;
  static __m512 load(const T* p) {
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static __m512 load(const T* p, __mmask16 m) { return _mm512_maskz_cvtph_ps(0xffff, _mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16Lanes {
  using T = uint16_t;
  static __m512 widen(__m256i v) {
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, _mm512_maskz_cvtepu16_epi32(0xffff, v), 16));
  }
  static __m512 load(const T* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static __m512 load(const T* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};
// The tile's activations, already f32.
struct F32Lanes {
  using T = float;
  static __m512 load(const T* p) { return _mm512_loadu_ps(p); }
  static __m512 load(const T* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

// NR weight rows (widened by W) against NT activation rows (by A), every pair
// its own chain. Rows past n_rows repeat the last one and are not stored.
template <class W, class A, int NR, int NT>
void chains(const uint16_t* const* w, const typename A::T* const* a, size_t n, size_t n_rows, float* y,
            size_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  auto step = [&](size_t i, auto&&... mask) {
    if constexpr (NR == 1) prefetch_row_ahead(w[0] + i);  // one row streamed from DRAM: dot, dot4
    __m512 wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = W::load(w[r] + i, mask...);
    for (int t = 0; t < NT; ++t) {
      const __m512 av = A::load(a[t] + i, mask...);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
    }
  };
  // The whole steps with plain loads, then the last one masked (masked loads
  // in every step made GCC keep acc in memory, stored every step).
  size_t i = 0;
  for (; i + 16 <= n; i += 16) step(i);
  if (i < n) step(i, __mmask16((1u << (n - i)) - 1));
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      const float s = hsum(acc[r][t]);
      if (size_t(r) < n_rows) y[size_t(t) * y_stride + size_t(r)] = s;
    }
}

template <class H>
float dot_16bit(const void* w, const void* a, size_t n) {
  const auto* wr = static_cast<const uint16_t*>(w);
  const auto* ar = static_cast<const uint16_t*>(a);
  float out;
  chains<H, H, 1, 1>(&wr, &ar, n, 1, &out, 1);
  return out;
}

template <class H>
void dot4_16bit(const void* w, const void* act, size_t stride, size_t n, float* out) {
  const auto* wr = static_cast<const uint16_t*>(w);
  std::array<const uint16_t*, 4> a;
  for (size_t t = 0; t < 4; ++t)
    a[t] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(act) + t * stride);
  chains<H, H, 1, 4>(&wr, a.data(), n, 1, out, 1);
}

// 4 rows x 6 tokens: 24 accumulators, 4 row vectors and an activation
// vector in the 32 registers.
template <class H>
void float_tile_16bit(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows,
                      size_t n_tokens, size_t n, float* y, size_t y_stride) {
  for_each_float_tile<uint16_t, float, 4, 6>(
      w, w_stride, act, act_stride, n_rows, n_tokens, y, y_stride,
      [&]<int NT>(const uint16_t* const* rows, const float* const* tokens, size_t nr, float* yt) {
        chains<H, F32Lanes, 4, NT>(rows, tokens, n, nr, yt, y_stride);
      });
}

template <class H>
DotKernel with_16bit(DotKernel k) {
  k.dot = dot_16bit<H>;
  k.dot4 = dot4_16bit<H>;
  k.rows4 = rows4_by_rows<dot_16bit<H>>;
  k.float_tile = float_tile_16bit<H>;
  k.tile_act = ActFormat::F32;
  return k;
}

}  // namespace

DotKernel float_kernel(DType w, DotKernel base) {
  switch (w) {
    case DType::F32: base.float_tile = float_tile_f32; return base;
    case DType::F16: return with_16bit<F16Lanes>(base);
    case DType::BF16: return with_16bit<BF16Lanes>(base);
    default: return base;
  }
}

}  // namespace kvlab::kernels::avx512
