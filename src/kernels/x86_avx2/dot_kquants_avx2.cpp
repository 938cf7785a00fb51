// AVX2 dot products of the K-quants (Q4_K, Q5_K, Q6_K) against Q8_K
// activations. Per super-block the integer sums come from vpmaddubsw
// (unsigned quants x signed activation bytes) and vpmaddwd by the sub-block
// scales, as 8 int32 lanes; each lane is scaled in float and accumulated
// across super-blocks, with one horizontal sum per result at the end.
// Reducing every super-block to one int first, as the scalar reference does,
// would equal it bit for bit, but puts two horizontal sums and a scalar
// multiply-add on each super-block's critical path: a 576x1536 GEMV on one
// thread took ~72 us that way for Q4_K and Q6_K, ~55-67 us this way
// (build-bench/kvlab_microbench --benchmark_filter='matmul/q[46]_k/576x1536').
//
// Bounds: vpmaddubsw lanes are at most 2*63*127 = 16002 (6-bit quants). An
// int32 lane gathers 32 scaled products: at most 32*63*31*127 = 7.9M for
// Q4_K / Q5_K, exact in float (< 2^24); for Q6_K up to 32*128*63*127 = 33M,
// which the conversion to float rounds by at most 3e-8 relative.
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/dot.h"
#include "kernels/dot_shapes.h"
#include "kernels/q4_k_rows8.h"
#include "kernels/q6_k_rows8.h"
#include "kernels/tile_count.h"
#include "kernels/x86_avx2/hsum_avx2.h"
#include "kernels/x86_avx2/rows8_avx2.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"

namespace kvlab::kernels::avx2 {
namespace {
using namespace tensor;
struct Tag {};  // this file's instances of the shared SIMD templates (q4_k_rows8.h)

inline __m256i load32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// One super-block's weights, decoded once and met by 1..4 activation rows:
// q[k] holds weights 32k..32k+31 as unsigned bytes, multiplied by scale[k]
// (two int16 scales per vector for Q6_K's 16-weight sub-blocks).
struct Unpacked {
  __m256i q[8];
  __m256i scale[8];
};

// The 8 scale vectors from 16 int16 values s (one per 16 weights): vector
// k, which meets weights 32k..32k+31, is s[2k] in its low 8 lanes and
// s[2k+1] in its high 8. One byte shuffle each, from s's 128-bit half
// copied to both halves.
[[gnu::always_inline]] inline void scale_vectors(__m256i s, __m256i out[8]) {
  const __m256i half[2] = {_mm256_permute2x128_si256(s, s, 0x00), _mm256_permute2x128_si256(s, s, 0x11)};
  for (int k = 0; k < 8; ++k) {
    const int lo = 2 * (k % 4), hi = lo + 1;  // the words picked within the half
    const __m256i pick = _mm256_set_m128i(_mm_set1_epi16(short((2 * hi + 1) << 8 | 2 * hi)),
                                          _mm_set1_epi16(short((2 * lo + 1) << 8 | 2 * lo)));
    out[k] = _mm256_shuffle_epi8(half[k / 4], pick);
  }
}

// 8 bytes -> 16 int16, each value twice (a 32-weight sub-block's value for
// both of its 16-weight halves).
[[gnu::always_inline]] inline __m256i widen_twice(uint32_t lo4, uint32_t hi4) {
  const __m128i v = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, int(hi4), int(lo4)));
  return _mm256_set_m128i(_mm_unpackhi_epi16(v, v), _mm_unpacklo_epi16(v, v));
}

// Q4_K / Q5_K: q in 0..15 (0..31), sub-block k = weights 32k.., scales 6-bit.
// The 12 scale bytes (blocks.h), as three little-endian words w0..w2, give
// the scales of sub-blocks 0-3 as w0's six-bit bytes and of 4-7 as w2's low
// nibbles plus w0's top two bits; the minimums likewise from w1, w2's high
// nibbles and w1's top bits. Returns the minimums, each twice, for the
// activations' 16-sums.
template <class Block>
[[gnu::always_inline]] inline __m256i unpack_q45(const Block& b, Unpacked& u) {
  const __m256i nib = _mm256_set1_epi8(0x0f);
  __m256i high = _mm256_setzero_si256();
  if constexpr (std::is_same_v<Block, BlockQ5_K>) high = load32(b.qh);
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load32(b.qs + 32 * c);
    u.q[2 * c] = _mm256_and_si256(v, nib);
    u.q[2 * c + 1] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nib);
    if constexpr (std::is_same_v<Block, BlockQ5_K>) {
      // Bit 2c (2c+1) of qh[l] is bit 4 of weight 64c + l (64c + 32 + l).
      const __m256i one = _mm256_set1_epi8(1);
      const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(high, 2 * c), one);
      const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(high, 2 * c + 1), one);
      u.q[2 * c] = _mm256_or_si256(u.q[2 * c], _mm256_slli_epi16(h0, 4));
      u.q[2 * c + 1] = _mm256_or_si256(u.q[2 * c + 1], _mm256_slli_epi16(h1, 4));
    }
  }
  uint32_t w[3];
  std::memcpy(w, b.scales, sizeof w);
  const uint32_t six = 0x3f3f3f3f, low4 = 0x0f0f0f0f, top2 = 0x30303030;
  scale_vectors(widen_twice(w[0] & six, (w[2] & low4) | ((w[0] >> 2) & top2)), u.scale);
  return widen_twice(w[1] & six, ((w[2] >> 4) & low4) | ((w[1] >> 2) & top2));
}

// Q6_K: q in 0..63 (the -32 is applied through the activation block sums).
// Vector k of half h covers weights 128h + 32k.., sub-blocks 8h + 2k, +1.
[[gnu::always_inline]] inline void unpack_q6(const BlockQ6_K& b, Unpacked& u, __m256i scales16) {
  const __m256i nib = _mm256_set1_epi8(0x0f), two = _mm256_set1_epi8(0x30);
  for (int h = 0; h < 2; ++h) {
    const __m256i lo0 = load32(b.ql + 64 * h), lo1 = load32(b.ql + 64 * h + 32), hi = load32(b.qh + 32 * h);
    __m256i* q = u.q + 4 * h;
    q[0] = _mm256_or_si256(_mm256_and_si256(lo0, nib), _mm256_and_si256(_mm256_slli_epi16(hi, 4), two));
    q[1] = _mm256_or_si256(_mm256_and_si256(lo1, nib), _mm256_and_si256(_mm256_slli_epi16(hi, 2), two));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo0, 4), nib), _mm256_and_si256(hi, two));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo1, 4), nib),
                           _mm256_and_si256(_mm256_srli_epi16(hi, 2), two));
  }
  scale_vectors(scales16, u.scale);
}

// sum_k scale[k] . (q[k] x y[32k..32k+31]) in 8 int32 lanes.
[[gnu::always_inline]] inline __m256i scaled_sum(const Unpacked& u, const int8_t* y) {
  __m256i acc = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) {
    const __m256i p = _mm256_maddubs_epi16(u.q[k], load32(y + 32 * k));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, u.scale[k]));
  }
  return acc;
}

template <class Block>
struct Q45K {
  using W = Block;
  struct Header {
    float d, dmin;
    __m256i mins16;  // sub-block j's minimum in lanes 2j and 2j+1
  };
  static Header unpack(const W& b, Unpacked& u) {
    const __m256i mins16 = unpack_q45(b, u);
    return {_cvtsh_ss(b.d), _cvtsh_ss(b.dmin), mins16};
  }
  // acc + d*d_y * sum_k sc_k*(q.y) - dmin*d_y * sum_j m_j*(bsum_2j + bsum_2j+1),
  // the minimums' sum in one vpmaddwd.
  static __m256 accumulate(__m256 acc, const Header& h, const Unpacked& u, const BlockQ8_K& y) {
    const __m256 summ = _mm256_cvtepi32_ps(_mm256_madd_epi16(load32(y.bsums), h.mins16));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(scaled_sum(u, y.qs)), _mm256_set1_ps(h.d * y.d), acc);
    return _mm256_fnmadd_ps(summ, _mm256_set1_ps(h.dmin * y.d), acc);
  }
};

struct Q6K {
  using W = BlockQ6_K;
  struct Header {
    float d;
    __m256i scales16;  // the 16 sub-block scales widened to int16
  };
  static Header unpack(const W& b, Unpacked& u) {
    const __m256i scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    unpack_q6(b, u, scales16);
    return {_cvtsh_ss(b.d), scales16};
  }
  // sum sc_i * (q - 32) * y = scaled_sum - 32 * sum_i sc_i * bsum_i.
  static __m256 accumulate(__m256 acc, const Header& h, const Unpacked& u, const BlockQ8_K& y) {
    const __m256i offset = _mm256_madd_epi16(load32(y.bsums), h.scales16);
    const __m256i sum = _mm256_sub_epi32(scaled_sum(u, y.qs), _mm256_slli_epi32(offset, 5));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_set1_ps(h.d * y.d), acc);
  }
};

// NR weight rows x NT activation rows, one vector accumulator per pair.
template <class K>
struct SuperBlocks {
  template <int NR, int NT>
  static void run(const void* w, size_t w_stride, const void* a, size_t a_stride, size_t n, float* out) {
    __m256 acc[NR * NT];
    for (auto& v : acc) v = _mm256_setzero_ps();
    Unpacked u;
    for (size_t b = 0; b < n / kQK_K; ++b)
      for (int r = 0; r < NR; ++r) {
        const auto& x = reinterpret_cast<const typename K::W*>(static_cast<const uint8_t*>(w) + size_t(r) * w_stride)[b];
        if constexpr (NR > 1) _mm_prefetch(reinterpret_cast<const char*>(&x) + NR * w_stride, _MM_HINT_T0);
        const auto header = K::unpack(x, u);
        for (int t = 0; t < NT; ++t) {
          const auto& y = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(a) + size_t(t) * a_stride)[b];
          acc[r * NT + t] = K::accumulate(acc[r * NT + t], header, u, y);
        }
      }
    for (int i = 0; i < NR * NT; ++i) out[i] = hsum(acc[i]);
  }
};

// ---- Q4_K in rows of 8 (kernels/rows8.h) -----------------------------------
// A group's super-block holds the 8 rows' d, then their dmin (f16, side by
// side), then the 12 scale bytes as 3 runs of 32 (run c: row r's bytes
// 4c..4c+3 in lane r), then the 128 quant bytes as 32 runs: run c holds row
// r's qs[4c..4c+3], whose low nibbles are weights 64(c/8) + 4(c%8) + 0..3
// (sub-block 2(c/8)) and high nibbles the same + 32 (sub-block 2(c/8) + 1).
// Lane r then carries row r's exact integer sums, sumi = sum_j sc_j * isum_j
// and summ = sum_j m_j * bsum_j, and the float terms repeat the scalar
// reference's operations in its order (dot_scalar.cpp), so results equal it
// bit for bit. Bounds: eight vpmaddubsw lanes of u4 x s8 add up in int16
// (8 * 2*15*127 = 30480); sumi stays below 8 * 63 * 60960 < 2^31.
// A q5_k block has its 32 bytes of fifth bits as 8 runs between the scales
// and the quants, or-ed into each quant (q5_k_fifth_bits): a run's pair sums
// grow to 2 * 31 * 128 = 7936, so its int16 sums take 4 runs, not 8, before
// vpmaddwd widens them.
template <class Block>
struct Q45_KRows8 {
  using L = Q45_KLayout<Block>;
  static constexpr int kRunsPerSum = L::kFifth ? 4 : 8;

  // Each 32-byte run is unpacked once for all NT tokens (sub-block pair j
  // at a time, so each token's two int16 sums stay in registers).
  template <int NT>
  static void run(const uint8_t* group, const uint8_t* act, size_t a_stride, size_t n, float* y, size_t y_stride) {
    __m256 acc[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t b = 0; b < n / kQK_K; ++b) {
      const uint8_t* blk = group + b * L::kBlockBytes;
      prefetch_ahead(blk, L::kBlockBytes);
      const auto x = [&](int t) -> const BlockQ8_K& {
        return reinterpret_cast<const BlockQ8_K*>(act + size_t(t) * a_stride)[b];
      };
      __m256i sc[8], m[8], sumi[NT];
      q4_k_scales_mins<Tag>(blk + L::kScales, sc, m);
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
      for (int j = 0; j < 4; ++j)
        for (int c0 = 0; c0 < 8; c0 += kRunsPerSum) {
          __m256i lo[NT], hi[NT];
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm256_setzero_si256();
          for (int c = c0; c < c0 + kRunsPerSum; ++c) {
            __m256i wl, wh;
            q45_k_unpack<Tag, Block>(blk, j, c, wl, wh);
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) {
              lo[t] = _mm256_add_epi16(lo[t], _mm256_maddubs_epi16(wl, broadcast4(x(t).qs + 64 * j + 4 * c)));
              hi[t] = _mm256_add_epi16(hi[t], _mm256_maddubs_epi16(wh, broadcast4(x(t).qs + 64 * j + 32 + 4 * c)));
              in_order(lo[t]);
              in_order(hi[t]);
            }
          }
#pragma GCC unroll 4
          for (int t = 0; t < NT; ++t) {
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(_mm256_madd_epi16(lo[t], ones), sc[2 * j]));
            sumi[t] = _mm256_add_epi32(sumi[t], _mm256_mullo_epi32(_mm256_madd_epi16(hi[t], ones), sc[2 * j + 1]));
          }
        }
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[t] = _mm256_add_ps(acc[t], q4_k_term<Tag>(blk, x(t), sumi[t], m));
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + size_t(t) * y_stride, acc[t]);
  }
};

// q6_k (q6_k_rows8.h) with vpmaddubsw: one weight vector k at a time, so
// NT tokens' sums fit the 16 registers; a run's u8 x s8 pair sums are at
// most 2 * 63 * 128 = 16128, so two runs add in int16 before vpmaddwd
// widens them (four would not fit).
struct Q6_KRows8 {
  template <int NT>
  static void run(const uint8_t* group, const uint8_t* act, size_t a_stride, size_t n, float* y, size_t y_stride) {
    namespace q6 = q6_k_rows8;
    __m256 acc[NT];
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);
    for (size_t b = 0; b < n / kQK_K; ++b) {
      const uint8_t* blk = group + b * q6::kBlockBytes;
      prefetch_ahead(blk, q6::kBlockBytes);
      const auto x = [&](int t) -> const BlockQ8_K& {
        return reinterpret_cast<const BlockQ8_K*>(act + size_t(t) * a_stride)[b];
      };
      __m256i sumi[NT];
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) sumi[t] = _mm256_setzero_si256();
#pragma GCC unroll 2
      for (int half = 0; half < 2; ++half)
#pragma GCC unroll 2
        for (int h = 0; h < 2; ++h)  // l in [16h, 16h + 16)
#pragma GCC unroll 4
          for (int k = 0; k < 4; ++k) {  // sub-block 8*half + 2k + h
            __m256i dot[NT];
#pragma GCC unroll 2
            for (int c2 = 0; c2 < 2; ++c2) {
              __m256i s16[NT];
#pragma GCC unroll 2
              for (int i = 0; i < 2; ++i) {
                const int c = 4 * h + 2 * c2 + i;
                const __m256i w = q6::unpack_one<Tag>(blk, half, c, k);
#pragma GCC unroll 4
                for (int t = 0; t < NT; ++t) {
                  const __m256i p = _mm256_maddubs_epi16(w, broadcast4(x(t).qs + 128 * half + 32 * k + 4 * c));
                  s16[t] = i ? _mm256_add_epi16(s16[t], p) : p;
                  in_order(s16[t]);
                }
              }
#pragma GCC unroll 4
              for (int t = 0; t < NT; ++t) {
                const __m256i d32 = _mm256_madd_epi16(s16[t], ones);
                dot[t] = c2 ? _mm256_add_epi32(dot[t], d32) : d32;
              }
            }
            const int sub = 8 * half + 2 * k + h;
            const __m256i sc = q6::scale<Tag>(blk, sub);
#pragma GCC unroll 4
            for (int t = 0; t < NT; ++t) sumi[t] = q6::add_sub_block<Tag>(sumi[t], dot[t], sc, x(t).bsums[sub]);
          }
#pragma GCC unroll 4
      for (int t = 0; t < NT; ++t) acc[t] = q6::add_term<Tag>(acc[t], blk, x(t), sumi[t]);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + size_t(t) * y_stride, acc[t]);
  }
};

// ---- Q8_K activations: the scalar reference's arithmetic (codecs_kquants.cpp
// quantize_row_q8_k), so the bytes are identical. It was 32% of a one-thread
// q4_k 576x1536 matmul of 64 tokens (perf of the microbenchmark), as long as
// a third of the dot products themselves.

// signed_absmax over one super-block: the first element of the largest
// magnitude, NaN never (max_ps returns its second operand, the running
// maximum, for a NaN lane).
inline float signed_absmax_block(const float* x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int j = 0; j < kQK_K; j += 8) m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)), m);
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  const float amax = _mm_cvtss_f32(h);
  if (amax == 0.f) return 0.f;
  const __m256 va = _mm256_set1_ps(amax);
  for (int j = 0; j < kQK_K; j += 8) {
    const __m256 v = _mm256_loadu_ps(x + j);
    if (const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign, v), va, _CMP_EQ_OQ)))
      return x[j + __builtin_ctz(unsigned(hit))];
  }
  return 0.f;  // not reached: some lane holds amax
}

// The sums of each of 4 vectors' 8 lanes.
inline __m128i hsum4_epi32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i s = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
  return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

void quantize_q8_k(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (size_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    const float max = signed_absmax_block(src);
    if (max == 0.f) {
      b[i] = BlockQ8_K{};
      continue;
    }
    const float iscale = -127.f / max;
    const __m256 vi = _mm256_set1_ps(iscale), lo = _mm256_set1_ps(-128.f), hi = _mm256_set1_ps(127.f);
    __m256i sums16[kQK_K / 16];  // lane sums of each 16 quants
    for (int k = 0; k < kQK_K / 32; ++k) {
      __m256i q[4];
      for (int v = 0; v < 4; ++v) {
        const __m256 r = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(src + 32 * k + 8 * v), vi),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
        // round_clamp: clamped in float first; NaN (max_ps's first operand) gives -128.
        q[v] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
      }
      const __m256i p8 = _mm256_permutevar8x32_epi32(
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3])),
          _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(b[i].qs + 32 * k), p8);
      sums16[2 * k] = _mm256_add_epi32(q[0], q[1]);
      sums16[2 * k + 1] = _mm256_add_epi32(q[2], q[3]);
    }
    for (int g = 0; g < kQK_K / 16; g += 8) {  // |sum| <= 16 * 128: int16 without saturation
      const __m128i s0 = hsum4_epi32(sums16[g], sums16[g + 1], sums16[g + 2], sums16[g + 3]);
      const __m128i s1 = hsum4_epi32(sums16[g + 4], sums16[g + 5], sums16[g + 6], sums16[g + 7]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(b[i].bsums + g), _mm_packs_epi32(s0, s1));
    }
    b[i].d = 1.f / iscale;
  }
}

template <class K>
constexpr DotKernel kernel_of() {
  using T = SuperBlocks<K>;
  return {ActFormat::Q8_K, quantize_q8_k, dot_1x1<T>, dot_1x4<T>, dot_4x1<T>};
}
constexpr DotKernel with_rows8(DotKernel k, decltype(DotKernel::rows8) rows8) {
  k.rows8 = rows8;
  return k;
}
const DotKernel kQ4_K = with_rows8(kernel_of<Q45K<BlockQ4_K>>(), kquant_rows8<Q45_KRows8<BlockQ4_K>>);
const DotKernel kQ5_K = with_rows8(kernel_of<Q45K<BlockQ5_K>>(), kquant_rows8<Q45_KRows8<BlockQ5_K>>);
const DotKernel kQ6_K = with_rows8(kernel_of<Q6K>(), kquant_rows8<Q6_KRows8>);

}  // namespace

const DotKernel* find_kquant(DType w) {
  switch (w) {
    case DType::Q4_K: return &kQ4_K;
    case DType::Q5_K: return &kQ5_K;
    case DType::Q6_K: return &kQ6_K;
    default: return nullptr;
  }
}

}  // namespace kvlab::kernels::avx2
