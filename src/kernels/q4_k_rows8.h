// The pieces the Q4_K and Q5_K rows-of-8 kernels (kernels/rows8.h) of both SIMD
// files share (dot_kquants_avx2.cpp, dot_avx512.cpp, each compiled for its
// own ISA): a super-block's sub-block scales and minimums, and its float
// term. `Isa` is a tag type of the including file's anonymous namespace, so
// each file gets its own instances and the copy built with AVX-512 flags is
// never the one the linker keeps for the AVX2 kernels.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "tensor/blocks.h"

namespace kvlab::kernels {

// Sub-block j's 6-bit scale and minimum of each row, one row per 32-bit lane
// (kquant_scale_min on the rows' 12 scale bytes as three 32-byte runs:
// word 0 = bytes 0..3, word 1 = 4..7, word 2 = 8..11 of every row).
template <class Isa>
[[gnu::always_inline]] inline void q4_k_scales_mins(const uint8_t* runs, __m256i sc[8], __m256i m[8]) {
  const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs));
  const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs + 32));
  const __m256i w2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs + 64));
  const __m256i low6 = _mm256_set1_epi32(63), low4 = _mm256_set1_epi32(15), low2 = _mm256_set1_epi32(3);
  auto bits = [](__m256i w, int shift, __m256i mask) {
    return _mm256_and_si256(_mm256_srl_epi32(w, _mm_cvtsi32_si128(shift)), mask);
  };
  for (int j = 0; j < 4; ++j) {
    sc[j] = bits(w0, 8 * j, low6);
    m[j] = bits(w1, 8 * j, low6);
    sc[j + 4] = _mm256_or_si256(bits(w2, 8 * j, low4), _mm256_slli_epi32(bits(w0, 8 * j + 6, low2), 4));
    m[j + 4] = _mm256_or_si256(bits(w2, 8 * j + 4, low4), _mm256_slli_epi32(bits(w1, 8 * j + 6, low2), 4));
  }
}

// Where a group's super-block keeps its parts (rows8.h): the 8 rows' d and
// dmin, the scale runs, for q5_k the 8 runs of fifth bits, the quant runs.
template <class Block>
struct Q45_KLayout {
  static constexpr bool kFifth = std::is_same_v<Block, tensor::BlockQ5_K>;
  static constexpr size_t kBlockBytes = 8 * sizeof(Block);
  static constexpr size_t kScales = 32, kHigh = 32 + 3 * 32, kQuants = kHigh + (kFifth ? 8 * 32 : 0);
};

// Bit `from` of each byte of qh moved to bit 4, the rest cleared.
template <class Isa>
[[gnu::always_inline]] inline __m256i fifth_bits(__m256i qh, int from) {
  const __m256i b4 = _mm256_set1_epi8(0x10);
  if (from <= 4) return _mm256_and_si256(_mm256_sll_epi16(qh, _mm_cvtsi32_si128(4 - from)), b4);
  return _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(from - 4)), b4);
}

// Quant run c of sub-block pair j, one row per 32-bit lane: wl holds the
// low nibbles (elements 64j + 4c .. + 3), wh the high ones (the same + 32).
// A q5_k run of fifth bits (c: qh bytes 4c..4c+3 of each row) adds bit 4:
// bit 2j of qh[l] belongs to element 64j + l, bit 2j + 1 to 64j + 32 + l.
template <class Isa, class Block>
[[gnu::always_inline]] inline void q45_k_unpack(const uint8_t* blk, int j, int c, __m256i& wl, __m256i& wh) {
  using L = Q45_KLayout<Block>;
  auto load = [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i v = load(blk + L::kQuants + 32 * (8 * j + c));
  wl = _mm256_and_si256(v, nibble);
  wh = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
  if constexpr (L::kFifth) {
    const __m256i qh = load(blk + L::kHigh + 32 * c);
    wl = _mm256_or_si256(wl, fifth_bits<Isa>(qh, 2 * j));
    wh = _mm256_or_si256(wh, fifth_bits<Isa>(qh, 2 * j + 1));
  }
}

// One token's term of a super-block `blk` (its 8 rows' d and dmin lead
// it): d*d_x * sumi - dmin*d_x * summ, with sumi = sum_j sc_j * isum_j the
// rows' exact integer sums and summ = sum_j m_j * bsum_j from the Q8_K
// block's 16-sums, in the scalar reference's float operations and order
// (dot_scalar.cpp).
template <class Isa>
[[gnu::always_inline]] inline __m256 q4_k_term(const uint8_t* blk, const tensor::BlockQ8_K& x, __m256i sumi,
                                               const __m256i m[8]) {
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
  const __m256 dmin = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk + 16)));
  __m256i summ = _mm256_setzero_si256();
  for (int j = 0; j < 8; ++j)
    summ = _mm256_add_epi32(summ, _mm256_mullo_epi32(m[j], _mm256_set1_epi32(x.bsums[2 * j] + x.bsums[2 * j + 1])));
  const __m256 yd = _mm256_set1_ps(x.d);
  return _mm256_sub_ps(_mm256_mul_ps(_mm256_mul_ps(d, yd), _mm256_cvtepi32_ps(sumi)),
                       _mm256_mul_ps(_mm256_mul_ps(dmin, yd), _mm256_cvtepi32_ps(summ)));
}

}  // namespace kvlab::kernels
