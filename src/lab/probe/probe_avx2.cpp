// AVX2 + FMA loops of `kvlab probe` (Haswell / Zen 1 and later). Compiled with
// -mavx2 -mfma; only called after kernels::active_isa() >= Avx2.
#include <immintrin.h>

#include <cstdint>

#include "lab/probe/probe.h"

namespace kvlab::perf::probe_kernels {
namespace {

// Streaming read: 8 x 32-byte loads per 256-byte step into 4 independent
// 64-bit integer accumulators (1-cycle adds), so the loop issues loads as fast
// as the core can and the memory system is the only limit.
uint64_t read_sum(const void* p, size_t bytes) {
  const __m256i* v = static_cast<const __m256i*>(p);
  const size_t n = bytes / 32;
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 8 <= n; i += 8) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(v + i + 0));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(v + i + 1));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(v + i + 2));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(v + i + 3));
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(v + i + 4));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(v + i + 5));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(v + i + 6));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(v + i + 7));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

// 12 independent vfmadd231ps chains: FMA latency (4-5 cycles) x 2 FMA ports
// needs 8-10 in flight; 12 + 2 constants fit the 16 ymm registers. The chain
// c = c * a + b converges to b / (1 - a) = 1, never denormal or infinite.
constexpr int kFmaAcc = 12;
double fp32(uint64_t iters) {
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-6f);
  __m256 c0 = _mm256_set1_ps(0.1f), c1 = _mm256_set1_ps(0.2f), c2 = _mm256_set1_ps(0.3f),
         c3 = _mm256_set1_ps(0.4f), c4 = _mm256_set1_ps(0.5f), c5 = _mm256_set1_ps(0.6f),
         c6 = _mm256_set1_ps(0.7f), c7 = _mm256_set1_ps(0.8f), c8 = _mm256_set1_ps(0.9f),
         c9 = _mm256_set1_ps(1.1f), c10 = _mm256_set1_ps(1.2f), c11 = _mm256_set1_ps(1.3f);
  for (uint64_t i = 0; i < iters; ++i) {
    c0 = _mm256_fmadd_ps(c0, a, b);
    c1 = _mm256_fmadd_ps(c1, a, b);
    c2 = _mm256_fmadd_ps(c2, a, b);
    c3 = _mm256_fmadd_ps(c3, a, b);
    c4 = _mm256_fmadd_ps(c4, a, b);
    c5 = _mm256_fmadd_ps(c5, a, b);
    c6 = _mm256_fmadd_ps(c6, a, b);
    c7 = _mm256_fmadd_ps(c7, a, b);
    c8 = _mm256_fmadd_ps(c8, a, b);
    c9 = _mm256_fmadd_ps(c9, a, b);
    c10 = _mm256_fmadd_ps(c10, a, b);
    c11 = _mm256_fmadd_ps(c11, a, b);
  }
  __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3)),
                           _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7)));
  s = _mm256_add_ps(s, _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  double r = 0;
  for (float f : lanes) r += f;
  return r;
}

// The quantized kernels' multiply (dot_avx2.cpp): vpmaddubsw (32 u8 x s8
// products, adjacent pairs summed to int16) then vpmaddwd by ones (pairs to
// int32), then vpaddd into an accumulator. 8 such chains per iteration on 4
// accumulators. The empty asm statements tell the compiler the inputs may
// have changed, so it recomputes the (otherwise loop-invariant) products every
// time; they emit no instruction.
double int8(uint64_t iters) {
  __m256i x = _mm256_set1_epi8(3);
  __m256i y0 = _mm256_set1_epi8(1), y1 = _mm256_set1_epi8(-2), y2 = _mm256_set1_epi8(5), y3 = _mm256_set1_epi8(-7);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (uint64_t i = 0; i < iters; ++i) {
    __asm__ volatile("" : "+x"(x), "+x"(y0), "+x"(y1), "+x"(y2), "+x"(y3));
    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y0), ones));
    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y1), ones));
    a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y2), ones));
    a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y3), ones));
    __asm__ volatile("" : "+x"(x), "+x"(y0), "+x"(y1), "+x"(y2), "+x"(y3));
    a0 = _mm256_add_epi32(a0, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y0), ones));
    a1 = _mm256_add_epi32(a1, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y1), ones));
    a2 = _mm256_add_epi32(a2, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y2), ones));
    a3 = _mm256_add_epi32(a3, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y3), ones));
  }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  double r = 0;
  for (int32_t v : lanes) r += v;
  return r;
}

}  // namespace

const Kernels& avx2() {
  static const Kernels k{
      "avx2",
      read_sum,
      fp32,
      kFmaAcc * 8 * 2.0,  // 12 FMAs x 8 lanes x (multiply + add)
      "vfmadd231ps ymm, 12 independent accumulators",
      int8,
      8 * 32 * 2.0,  // 8 vpmaddubsw x 32 int8 multiply-adds x 2 op
      "vpmaddubsw + vpmaddwd ymm, as in the q4/q8 dot kernels",
  };
  return k;
}

}  // namespace kvlab::perf::probe_kernels
