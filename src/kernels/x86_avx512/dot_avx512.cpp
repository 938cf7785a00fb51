// AVX-512 VNNI kernels (Ice Lake, Sapphire Rapids, Zen 4 and later).
// Compiled with -mavx512f/bw/vl/dq/vnni; only called after
// cpu().best() == Avx512, which requires VNNI.
//
// What VNNI changes is the rows-of-8 matmul (kernels/rows8.h: q4_0, q4_1,
// q5_0, q5_1, q8_0, q4_k, q5_k, q6_k), where the prefill, the batched decode steps and
// the LM head spend their time. The
// AVX2 kernels multiply bytes with vpmaddubsw (u8 x s8 pairs summed into
// int16), widen with vpmaddwd and add, and move the weights' signs onto the
// activations for signed formats (two vpsignb per product); vpdpbusd does a
// u8 x s8 product, the sum of each 4 and the int32 accumulation in one
// instruction, with no int16 stage that could overflow. A 32-element block
// of 8 rows against one token is then 8 instructions. The EVEX encoding
// gives 32 vector registers, so a whole block's 8 weight vectors stay live
// for all of a pass's tokens (the AVX2 kernels take blocks in halves to fit
// 16).
//
// vpdpbusd needs unsigned weights. q4_1 and q5_1 quants are unsigned
// already. The signed formats are used as unsigned quants u = q + c with a
// constant c (q4_0: the nibble, c = 8; q5_0: the 5-bit value, c = 16;
// q8_0: q xor 0x80, c = 128), and the block's exact integer sum is
//   sum(q * x) = sum(u * x) - c * sum(x),
// with sum(x), the activation block's quant sum, given by rows8_act_scales.
// Both terms are integers below 2^24 in magnitude (32 * 255 * 127 and
// 128 * 32 * 127), so in f32 the subtraction is exact and yields the same
// float(sumi) as the scalar reference; the block's term is then scaled with
// the reference's float operations in its order (dot_scalar.cpp), lane by
// lane, so every result equals it bit for bit, like the AVX2 kernels.
//
// Everything else is the AVX2 set's but the float formats' kernels
// (dot_float_avx512.cpp; on CPUs with AVX512_BF16 dot_bf16_avx512bf16.cpp
// for bf16): activation quantization, f32's dot products, and the
// quantized formats' row-major dot products, which the engine
// runs only with --mmap and for matrices that are not whole groups of 8
// rows. 512-bit vectors bought nothing in most places they were tried on the
// Zen 4 cores this was measured on, which run 512-bit operations as two
// halves (see attention_avx512.cpp); the one exception is rows16_tokens
// below, where they halve the broadcast loads rather than the arithmetic.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/dot.h"
#include "kernels/dot_shapes.h"
#include "kernels/q4_k_rows8.h"
#include "kernels/q6_k_rows8.h"
#include "kernels/tile_count.h"
#include "tensor/blocks.h"

namespace kvlab::kernels::avx512 {
namespace {
using namespace tensor;
struct Tag {};  // this file's instances of the shared SIMD templates (q4_k_rows8.h)

// Helpers of this file only: the AVX2 ones (rows8_avx2.h) are compiled for
// AVX2, and an inline function built with these flags in their namespace
// could be the copy the linker keeps for the AVX2 kernels too.
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
// Two groups' 8-lane vectors as one 16-lane one (rows16_tokens below): the
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

// q4_k and q5_k x q8_k (the super-block layout: dot_kquants_avx2.cpp): each
// 32-byte run of quants is unpacked once for all NT tokens; vpdpbusd gives
// each token's sub-block sums as int32 lanes directly (the AVX2 kernel adds
// eight vpmaddubsw results in int16, then widens), which are then scaled
// and finished exactly as there (q4_k_rows8.h). 4 tokens per pass: their
// two sums per sub-block pair, totals and accumulators with the scales and
// minimums fill the 32 registers. q5_k's fifth bits (after the scales: run
// c holds qh bytes 4c..4c+3 of each row) go to bit 4 of each quant: bit 2j
// of qh[l] for element 64j + l, bit 2j + 1 for element 64j + 32 + l.
template <class Block>
struct Q45_KVnni {
  using L = Q45_KLayout<Block>;
  template <int NT>
  static void run(const uint8_t* group, const uint8_t* act, size_t a_stride, size_t n, float* y, size_t y_stride) {
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (size_t b = 0; b < n / tensor::kQK_K; ++b) {
      const uint8_t* blk = group + b * L::kBlockBytes;
      prefetch_ahead(blk, L::kBlockBytes);
      const auto x = [&](int t) -> const tensor::BlockQ8_K& {
        return reinterpret_cast<const tensor::BlockQ8_K*>(act + size_t(t) * a_stride)[b];
      };
      __m256i sc[8], m[8], sumi[NT];
      q4_k_scales_mins<Tag>(blk + L::kScales, sc, m);
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j) {
        __m256i lo[NT], hi[NT];
        for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
          __m256i wl, wh;
          q45_k_unpack<Tag, Block>(blk, j, c, wl, wh);
          for (int t = 0; t < NT; ++t) {
            lo[t] = _mm256_dpbusd_epi32(lo[t], wl, broadcast4(x(t).qs + 64 * j + 4 * c));
            hi[t] = _mm256_dpbusd_epi32(hi[t], wh, broadcast4(x(t).qs + 64 * j + 32 + 4 * c));
          }
        }
        for (int t = 0; t < NT; ++t) {
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(lo[t], sc[2 * j]));
          sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(hi[t], sc[2 * j + 1]));
        }
      }
      for (int t = 0; t < NT; ++t) acc[t] = _mm256_add_ps(acc[t], q4_k_term<Tag>(blk, x(t), sumi[t], m));
    }
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + size_t(t) * y_stride, acc[t]);
  }
};

// q6_k x q8_k (rows8.h's q6_k runs; the arithmetic: q6_k_rows8.h). Each
// sub-block's 4 runs give one vpdpbusd chain per token; 4 tokens per pass.
struct Q6_KVnni {
  template <int NT>
  static void run(const uint8_t* group, const uint8_t* act, size_t a_stride, size_t n, float* y, size_t y_stride) {
    namespace q6 = q6_k_rows8;
    __m256 acc[NT];
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    for (size_t b = 0; b < n / tensor::kQK_K; ++b) {
      const uint8_t* blk = group + b * q6::kBlockBytes;
      prefetch_ahead(blk, q6::kBlockBytes);
      const auto x = [&](int t) -> const tensor::BlockQ8_K& {
        return reinterpret_cast<const tensor::BlockQ8_K*>(act + size_t(t) * a_stride)[b];
      };
      __m256i sumi[NT];
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h) {  // l in [16h, 16h + 16): sub-blocks 8*half + 2k + h
          __m256i dot[NT][4];
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
            for (int k = 0; k < 4; ++k) dot[t][k] = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int c = 4 * h; c < 4 * h + 4; ++c) {  // l = 4c .. 4c + 3
            __m256i w[4];
            q6::unpack<Tag>(blk, half, c, w);
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t)
#pragma GCC unroll 4
              for (int k = 0; k < 4; ++k)
                dot[t][k] = _mm256_dpbusd_epi32(dot[t][k], w[k], broadcast4(x(t).qs + 128 * half + 32 * k + 4 * c));
          }
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {
            const int sub = 8 * half + 2 * k + h;
            const __m256i sc = q6::scale<Tag>(blk, sub);
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) sumi[t] = q6::add_sub_block<Tag>(sumi[t], dot[t][k], sc, x(t).bsums[sub]);
          }
        }
      for (int t = 0; t < NT; ++t) acc[t] = q6::add_term<Tag>(acc[t], blk, x(t), sumi[t]);
    }
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + size_t(t) * y_stride, acc[t]);
  }
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

DotKernel with_rows8(DType w, decltype(DotKernel::rows8) rows8, size_t tokens,
                     decltype(DotKernel::rows16) rows16 = nullptr) {
  DotKernel k = *avx2::find(w);
  k.rows8 = rows8;
  k.rows8_tokens = tokens;
  k.rows16 = rows16;
  return k;
}

const DotKernel* float_set(DType w) {
  static const DotKernel f32 = float_kernel(DType::F32, *avx2::find(DType::F32));
  static const DotKernel f16 = float_kernel(DType::F16, *avx2::find(DType::F16));
  static const DotKernel bf16 = cpu().avx512bf16 ? avx512bf16::bf16_kernel(*avx2::find(DType::BF16))
                                                 : float_kernel(DType::BF16, *avx2::find(DType::BF16));
  return w == DType::F32 ? &f32 : w == DType::F16 ? &f16 : &bf16;
}

}  // namespace

const DotKernel* find(DType w) {
  static const DotKernel q4_0 = with_rows8(DType::Q4_0, rows8<Q4_0Vnni>, 8, rows16<Q4_0Vnni, 8>);
  static const DotKernel q4_1 = with_rows8(DType::Q4_1, rows8<Q4_1Vnni>, 8, rows16<Q4_1Vnni, 8>);
  static const DotKernel q8_0 = with_rows8(DType::Q8_0, rows8<Q8_0Vnni>, 8, rows16<Q8_0Vnni, 8>);
  static const DotKernel q5_0 = with_rows8(DType::Q5_0, rows8<Q5_0Vnni>, 8, rows16<Q5_0Vnni, 16>);
  static const DotKernel q5_1 = with_rows8(DType::Q5_1, rows8<Q5_1Vnni>, 8, rows16<Q5_1Vnni, 16>);
  static const DotKernel q4_k = with_rows8(DType::Q4_K, kquant_rows8<Q45_KVnni<BlockQ4_K>>, 4);
  static const DotKernel q5_k = with_rows8(DType::Q5_K, kquant_rows8<Q45_KVnni<BlockQ5_K>>, 4);
  static const DotKernel q6_k = with_rows8(DType::Q6_K, kquant_rows8<Q6_KVnni>, 4);
  switch (w) {
    case DType::Q4_0: return &q4_0;
    case DType::Q4_1: return &q4_1;
    case DType::Q8_0: return &q8_0;
    case DType::Q5_0: return &q5_0;
    case DType::Q5_1: return &q5_1;
    case DType::Q4_K: return &q4_k;
    case DType::Q5_K: return &q5_k;
    case DType::Q6_K: return &q6_k;
    case DType::F32:
    case DType::F16:
    case DType::BF16: return float_set(w);
    default: return avx2::find(w);
  }
}

}  // namespace kvlab::kernels::avx512
