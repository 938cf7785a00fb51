// The AVX-512 VNNI rows-of-8 kernels of the formats with 32-element blocks
// (q4_0, q4_1, q5_0, q5_1, q8_0): how a block of 8 rows unpacks to unsigned
// quants, its float term, and the kernels that meet it with 1..16 tokens.
// dot_avx512.cpp registers them; rows16_amx_avx512.cpp unpacks the same
// blocks for the tile unit and runs these for its leftover tokens. Only
// files compiled with the AVX-512 flags (*_avx512.cpp) include this.
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/tile_count.h"
#include "tensor/blocks.h"

namespace kvlab::kernels::avx512::vnni {
using namespace tensor;

// Helpers of the AVX-512 files only: the AVX2 ones (rows8_avx2.h) are
// compiled for AVX2, and an inline function built with these flags in their
// namespace could be the copy the linker keeps for the AVX2 kernels too.
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}
inline __m256i load32(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 load_halves8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// Software prefetch this far ahead of the block in use, as the AVX2 kernels
// do (rows8_avx2.h) but further: decode streams the weights, and with the
// wider loads the 1 KiB that suits AVX2 leaves lines missing. On Zen 4,
// 4 KiB into L1 beat 1 and 2 KiB; on Sapphire Rapids, 8 KiB into L2 beat
// 4 KiB into L1 (tg128 about 1.15x) and 4 and 16 KiB into L2, and on Zen 4
// the two are level. Prefill is unchanged. bench/alternate-bench with
// builds of each distance measures it.
constexpr size_t kPrefetchAhead = 8192;
inline void prefetch_ahead(const uint8_t* blk, size_t block_bytes) {
  for (size_t o = 0; o < block_bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchAhead + o), _MM_HINT_T1);
}

// A kind K gives, for one column block of a group: `load`, the 8 weight
// vectors w[i] whose lane r holds row r's unsigned quants for activation
// bytes 4i..4i+3; `kBias`, the constant c above (0: none); the block's
// header `scales`; and `accumulate`, the block's float term added to a
// token's accumulator, given the block sum as f32 and the activation block's
// d and s (rows8_act_scales).

// Runs 0..3 of nibbles: low nibbles of run c are elements 4c..4c+3, its high
// nibbles 16+4c.. (rows8.h).
inline void load_nibbles(const uint8_t* runs, __m256i w[8]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load32(runs + 32 * c);
    w[c] = _mm256_and_si256(v, mask);
    w[4 + c] = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
  }
}

// The two kinds of block header and float term: d alone (q4_0, q5_0, q8_0,
// against q8_0 activation blocks) and d with m (q4_1, q5_1, against q8_1,
// whose activation sums the m term needs).
// Two groups' 8-lane vectors as one 16-lane one (group_tokens below): the
// first group in lanes 0-7. (Zero-masked inserts with every lane on, from a
// zero vector: the plain intrinsics and casts start from _mm512_undefined_*,
// which GCC 12 reports as maybe uninitialized.)
inline __m512 join(__m256 a, __m256 b) {
  return _mm512_maskz_insertf32x8(0xffff, _mm512_maskz_insertf32x8(0xffff, _mm512_setzero_ps(), a, 0), b, 1);
}
inline __m512i join(__m256i a, __m256i b) {
  return _mm512_maskz_inserti64x4(0xff, _mm512_maskz_inserti64x4(0xff, _mm512_setzero_si512(), a, 0), b, 1);
}

// Each takes its block header in 8 lanes (one group) or 16 (two groups), and
// applies the same operations to every lane either way.
struct DScaled {
  using A = BlockQ8_0;
  struct Scales {
    __m256 d;
  };
  struct Scales16 {
    __m512 d;
  };
  static Scales scales(const uint8_t* blk) { return {load_halves8(blk)}; }
  static Scales16 scales(const uint8_t* a, const uint8_t* b) { return {join(load_halves8(a), load_halves8(b))}; }
  // float(sumi) * (d_w*d_x) + acc, one rounding (the reference's std::fma).
  static __m256 accumulate(__m256 acc, __m256 sum, const Scales& s, const float* xs) {
    return _mm256_fmadd_ps(sum, _mm256_mul_ps(s.d, _mm256_set1_ps(xs[0])), acc);
  }
  static __m512 accumulate(__m512 acc, __m512 sum, const Scales16& s, const float* xs) {
    return _mm512_fmadd_ps(sum, _mm512_mul_ps(s.d, _mm512_set1_ps(xs[0])), acc);
  }
};
struct DMScaled {
  using A = BlockQ8_1;
  struct Scales {
    __m256 d, m;
  };
  struct Scales16 {
    __m512 d, m;
  };
  static Scales scales(const uint8_t* blk) { return {load_halves8(blk), load_halves8(blk + 16)}; }
  static Scales16 scales(const uint8_t* a, const uint8_t* b) {
    return {join(load_halves8(a), load_halves8(b)), join(load_halves8(a + 16), load_halves8(b + 16))};
  }
  // float(sumi) * (d_w*d_x) + (m_w*s_x + acc).
  static __m256 accumulate(__m256 acc, __m256 sum, const Scales& s, const float* xs) {
    const __m256 dd = _mm256_mul_ps(s.d, _mm256_set1_ps(xs[0]));
    return _mm256_fmadd_ps(sum, dd, _mm256_fmadd_ps(s.m, _mm256_set1_ps(xs[1]), acc));
  }
  static __m512 accumulate(__m512 acc, __m512 sum, const Scales16& s, const float* xs) {
    const __m512 dd = _mm512_mul_ps(s.d, _mm512_set1_ps(xs[0]));
    return _mm512_fmadd_ps(sum, dd, _mm512_fmadd_ps(s.m, _mm512_set1_ps(xs[1]), acc));
  }
};

struct Q4_1Vnni : DMScaled {
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ4_1);
  static constexpr int kBias = 0;
  static void load(const uint8_t* blk, __m256i w[8]) { load_nibbles(blk + 32, w); }
};

struct Q4_0Vnni : DScaled {
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ4_0);
  static constexpr int kBias = 8;
  static void load(const uint8_t* blk, __m256i w[8]) { load_nibbles(blk + 16, w); }
};

struct Q8_0Vnni : DScaled {
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ8_0);
  static constexpr int kBias = 128;
  static void load(const uint8_t* blk, __m256i w[8]) {
    const __m256i flip = _mm256_set1_epi8(char(0x80));
    for (int i = 0; i < 8; ++i) w[i] = _mm256_xor_si256(load32(blk + 16 + 32 * i), flip);
  }
};

// q5_0 / q5_1: the run after the headers holds row r's 32 fifth bits in lane
// r, then the four nibble runs follow (rows8.h). Bit e of the word is element
// e's fifth bit; run c's low nibbles are elements 4c..4c+3 (bits in byte
// c/2, the high four for odd c), its high nibbles 16+4c.. (byte 2 + c/2).
// Each lane's byte is copied to its 4 bytes, byte k tests its bit, and the
// bytes whose bit is set get 16 added (their nibble has no bit 4).
inline __m256i with_fifth_bits(__m256i w, __m256i words, int byte, int odd) {
  const __m256i copy = _mm256_add_epi8(
      _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
      _mm256_set1_epi8(char(byte)));
  const __m256i bit = _mm256_set1_epi32(odd ? int(0x80402010) : 0x08040201);
  const __mmask32 set = _mm256_test_epi8_mask(_mm256_shuffle_epi8(words, copy), bit);
  return _mm256_mask_add_epi8(w, set, w, _mm256_set1_epi8(0x10));
}
template <size_t kHeaderBytes>
inline void load_q5(const uint8_t* blk, __m256i w[8]) {
  const __m256i words = load32(blk + kHeaderBytes);
  load_nibbles(blk + kHeaderBytes + 32, w);
  for (int c = 0; c < 4; ++c) {
    w[c] = with_fifth_bits(w[c], words, c / 2, c % 2);
    w[4 + c] = with_fifth_bits(w[4 + c], words, 2 + c / 2, c % 2);
  }
}

struct Q5_0Vnni : DScaled {
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ5_0);
  static constexpr int kBias = 16;
  static void load(const uint8_t* blk, __m256i w[8]) { load_q5<16>(blk, w); }
};

struct Q5_1Vnni : DMScaled {
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ5_1);
  static constexpr int kBias = 0;
  static void load(const uint8_t* blk, __m256i w[8]) { load_q5<32>(blk, w); }
};

// The vector width of the rows-of-8 kernels below: one group in 8 lanes
// (256-bit vectors) or two groups in 16 (512-bit, rows16), the second
// `second` bytes after the first in the weights and `pair_rows` floats after
// it in y. Every lane gets the same operations either way.
template <int L>
struct Lanes;
template <>
struct Lanes<8> {
  using I = __m256i;
  using F = __m256;
  static I dp(I acc, I w, int32_t x) { return _mm256_dpbusd_epi32(acc, w, _mm256_set1_epi32(x)); }
  static F to_float(I a, I b) { return _mm256_cvtepi32_ps(_mm256_add_epi32(a, b)); }
  static F fnmadd(float a, float b, F c) { return _mm256_fnmadd_ps(_mm256_set1_ps(a), _mm256_set1_ps(b), c); }
  template <class K>
  static void load(const uint8_t* blk, size_t, I w[8]) { K::load(blk, w); }
  template <class K>
  static auto scales(const uint8_t* blk, size_t) { return K::scales(blk); }
  static void prefetch(const uint8_t* blk, size_t, size_t bytes) { prefetch_ahead(blk, bytes); }
  static void store(float* y, size_t, F acc) { _mm256_storeu_ps(y, acc); }
};
template <>
struct Lanes<16> {
  using I = __m512i;
  using F = __m512;
  static I dp(I acc, I w, int32_t x) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x)); }
  // (zero-masked with every lane on: as in join)
  static F to_float(I a, I b) { return _mm512_maskz_cvtepi32_ps(0xffff, _mm512_add_epi32(a, b)); }
  static F fnmadd(float a, float b, F c) { return _mm512_fnmadd_ps(_mm512_set1_ps(a), _mm512_set1_ps(b), c); }
  template <class K>
  static void load(const uint8_t* blk, size_t second, I w[8]) {
    __m256i lo[8], hi[8];
    K::load(blk, lo);
    K::load(blk + second, hi);
    for (int i = 0; i < 8; ++i) w[i] = join(lo[i], hi[i]);
  }
  template <class K>
  static auto scales(const uint8_t* blk, size_t second) { return K::scales(blk, blk + second); }
  static void prefetch(const uint8_t* blk, size_t second, size_t bytes) {
    prefetch_ahead(blk, bytes);
    prefetch_ahead(blk + second, bytes);
  }
  // Lanes 0-7 to the first group's rows, 8-15 to the second's (masked stores
  // touch only their lanes' bytes).
  static void store(float* y, size_t pair_rows, F acc) {
    _mm512_mask_storeu_ps(y, 0x00ff, acc);
    _mm512_mask_storeu_ps(y + pair_rows - 8, 0xff00, acc);
  }
};

// One group (L = 8) or two (L = 16) against NT tokens (up to 16): the block's
// 8 weight vectors are loaded once and meet all NT activation rows. Each
// token's block sum runs as two chains of 4 vpdpbusd, added at the end: as
// one chain of 8 dependent instructions it was latency-bound (q4_1
// 1536x576, 64 tokens, 1 thread: 542 -> 480 us), and 8 tokens per pass
// rather than 4 took it to 444.
//
// Two groups per call (rows16) give every lane the operations one group
// gives it, so the results are the same bits; what changes is that one
// activation broadcast (and one broadcast of each of its scales) serves 16
// rows instead of 8. With several tokens the 8-lane kernel ran 8 broadcast
// loads and 2 scale loads per token and block next to its 8 vpdpbusd, and
// perf's samples (matmul/q4_1:rows8/1536x576/tok:8, in cache) sat on the
// broadcasts, at 33 multiply-adds per cycle against the probe's 63. In
// cache, one thread (bench/alternate-micro, 5 rounds): 1536x576 at 4, 8 and
// 64 tokens 33 -> 27, 59 -> 48, 491 -> 415 us; 576x1536 at 64 tokens
// 505 -> 399 us; one token unchanged. matmul.cpp says from how many tokens
// the engine pairs groups.
template <class K, int L, int NT>
void group_tokens(const uint8_t* group, size_t second, const uint8_t* act, size_t a_stride, const float* scales,
                  size_t s_stride, size_t n, float* y, size_t pair_rows, size_t y_stride) {
  using V = Lanes<L>;
  using A = typename K::A;
  typename V::F acc[NT];
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) acc[t] = typename V::F{};
  for (size_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = group + b * K::kBlockBytes;
    V::prefetch(blk, second, K::kBlockBytes);
    typename V::I w[8];
    V::template load<K>(blk, second, w);
    const auto s = V::template scales<K>(blk, second);
#pragma GCC unroll 16
    for (int t = 0; t < NT; ++t) {
      const int8_t* qs = reinterpret_cast<const A*>(act + size_t(t) * a_stride)[b].qs;
      const float* xs = scales + size_t(t) * s_stride + 2 * b;
      typename V::I s0{}, s1{};
#pragma GCC unroll 8
      for (int i = 0; i < 8; i += 2) {
        int32_t x0, x1;
        std::memcpy(&x0, qs + 4 * i, 4);
        std::memcpy(&x1, qs + 4 * i + 4, 4);
        s0 = V::dp(s0, w[i], x0);
        s1 = V::dp(s1, w[i + 1], x1);
      }
      typename V::F sumf = V::to_float(s0, s1);
      if constexpr (K::kBias != 0) sumf = V::fnmadd(float(K::kBias), xs[1], sumf);
      acc[t] = K::accumulate(acc[t], sumf, s, xs);
    }
  }
#pragma GCC unroll 16
  for (int t = 0; t < NT; ++t) V::store(y + size_t(t) * y_stride, pair_rows, acc[t]);
}

template <class K>
void rows8(const void* group, const void* act, size_t a_stride, const float* scales, size_t s_stride, size_t n_tokens,
           size_t n, float* y, size_t y_stride) {
  with_tile_count<8>(n_tokens, [&]<int NT>() {
    group_tokens<K, 8, NT>(static_cast<const uint8_t*>(group), 0, static_cast<const uint8_t*>(act), a_stride, scales,
                           s_stride, n, y, 0, y_stride);
  });
}

// Two groups against all n_tokens, in passes of up to kTokens. A pass
// unpacks each block's weights once for its tokens; q5_0 and q5_1 spend 3
// more operations per weight vector on the fifth bits than q4 does
// (with_fifth_bits), and 16 tokens per pass rather than 8 made q5_0 faster:
// 1536x576, 1 thread, CPU time, median of 5 alternating rounds, 512 tokens
// 3698 -> 3567 us, 64 tokens 435 -> 414 us. q4_1 was level (about 3050 us
// either way), so the other kinds keep 8.
// A pass is a call of its own: inlined into the loop over passes, the
// pointer arithmetic of the loop took general registers from the kernel,
// which then moved pointers through vector registers (q4_1 about 3% slower).
template <class K, int kTokens>
[[gnu::noinline]] void rows16_pass(const uint8_t* group, size_t pair_bytes, const uint8_t* act, size_t a_stride,
                                   const float* scales, size_t s_stride, size_t n_tokens, size_t n, float* y,
                                   size_t pair_rows, size_t y_stride) {
  with_tile_count<kTokens>(n_tokens, [&]<int NT>() {
    group_tokens<K, 16, NT>(group, pair_bytes, act, a_stride, scales, s_stride, n, y, pair_rows, y_stride);
  });
}
template <class K, int kTokens>
void rows16(const void* group, size_t pair_bytes, const void* act, size_t a_stride, const float* scales,
            size_t s_stride, size_t n_tokens, size_t n, float* y, size_t pair_rows, size_t y_stride) {
  for (size_t t = 0; t < n_tokens; t += kTokens)
    rows16_pass<K, kTokens>(static_cast<const uint8_t*>(group), pair_bytes,
                            static_cast<const uint8_t*>(act) + t * a_stride, a_stride, scales + t * s_stride, s_stride,
                            std::min(size_t(kTokens), n_tokens - t), n, y + t * y_stride, pair_rows, y_stride);
}

}  // namespace kvlab::kernels::avx512::vnni
