// The pieces the Q6_K rows-of-8 kernels (kernels/rows8.h) of both SIMD files
// share (dot_kquants_avx2.cpp, dot_avx512.cpp, each compiled for its own
// ISA; `Isa` is a tag type of the including file's anonymous namespace, as
// in q4_k_rows8.h). A weight is q - 32 with q = its low nibble | its bit
// pair << 4 in 0..63: the kernels multiply q unsigned, and the -32 comes
// back through the activations' 16-sums, so sub-block j of a row adds
// sc_j * (dot_j - 32 * bsum_j), exact in int32 (at most 256 * 128 * 32 *
// 127 < 2^31 in all): the scalar reference's sumi. In half n of the
// super-block, at position l = 0..31: ql byte 64n + l holds elements
// 128n + l (low nibble) and + 64 (high), ql byte 64n + 32 + l elements + 32
// and + 96, and qh byte 32n + l their four bit pairs.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "tensor/blocks.h"

namespace kvlab::kernels::q6_k_rows8 {

// Offsets in a group's block (rows8.h): the 8 rows' d, the low-nibble runs,
// the bit-pair runs, the scale runs.
inline constexpr size_t kBlockBytes = 8 * sizeof(tensor::BlockQ6_K);
inline constexpr size_t kLow = 16, kHigh = 16 + 32 * 32, kScales = 16 + 48 * 32;

// The weight vector k (0..3) of positions l = 4c .. 4c + 3 of half n: in
// lane r, row r's q of elements 128n + 32k + l, as bytes.
template <class Isa>
[[gnu::always_inline]] inline __m256i unpack_one(const uint8_t* blk, int half, int c, int k) {
  auto load = [](const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); };
  const __m256i nibble = _mm256_set1_epi8(0x0f), pair = _mm256_set1_epi8(0x30);
  const __m256i low = load(blk + kLow + 32 * (16 * half + 8 * (k % 2) + c));
  const __m256i hb = load(blk + kHigh + 32 * (8 * half + c));
  const __m256i nib = _mm256_and_si256(k < 2 ? low : _mm256_srli_epi16(low, 4), nibble);
  const int shift = 4 - 2 * k;  // bits 2k, 2k + 1 of the bit-pair byte to bits 4, 5
  const __m256i bits = shift >= 0 ? _mm256_sll_epi16(hb, _mm_cvtsi32_si128(shift))
                                  : _mm256_srl_epi16(hb, _mm_cvtsi32_si128(-shift));
  return _mm256_or_si256(nib, _mm256_and_si256(bits, pair));
}
// All four (the loads are the same for every k).
template <class Isa>
[[gnu::always_inline]] inline void unpack(const uint8_t* blk, int half, int c, __m256i w[4]) {
  for (int k = 0; k < 4; ++k) w[k] = unpack_one<Isa>(blk, half, c, k);
}

// Row r's int8 scale of sub-block `sub`, sign-extended in lane r.
template <class Isa>
[[gnu::always_inline]] inline __m256i scale(const uint8_t* blk, int sub) {
  const __m256i run = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + kScales + 32 * (sub / 4)));
  return _mm256_srai_epi32(_mm256_sll_epi32(run, _mm_cvtsi32_si128(24 - 8 * (sub % 4))), 24);
}

// sumi += sc * (dot - 32 * bsum) for one token's sub-block.
template <class Isa>
[[gnu::always_inline]] inline __m256i add_sub_block(__m256i sumi, __m256i dot, __m256i sc, int16_t bsum) {
  return _mm256_add_epi32(sumi, _mm256_mullo_epi32(_mm256_sub_epi32(dot, _mm256_set1_epi32(32 * bsum)), sc));
}

// The reference's (d * d_x) * float(sumi), added to the row's sum.
template <class Isa>
[[gnu::always_inline]] inline __m256 add_term(__m256 acc, const uint8_t* blk, const tensor::BlockQ8_K& x, __m256i sumi) {
  const __m256 d = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(blk)));
  return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(d, _mm256_set1_ps(x.d)), _mm256_cvtepi32_ps(sumi)));
}

}  // namespace kvlab::kernels::q6_k_rows8
