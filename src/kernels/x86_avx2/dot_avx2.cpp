// AVX2 + FMA + F16C dot products (Haswell / Zen 1 and later). Compiled with
// -mavx2 -mfma -mf16c; only called after cpu().best() >= Avx2.
//
// Quantized blocks use the unsigned x signed byte multiply (vpmaddubsw), which
// sums adjacent pairs into int16 without overflow here (|q_w| <= 15 or we move
// the sign onto the activation, |q_x| <= 127, 2*127*127 < 32767), then
// vpmaddwd with ones to widen to int32 lanes.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <cstring>

#include "kernels/dot.h"
#include "kernels/dot_shapes.h"
#include "kernels/float_tiles.h"
#include "kernels/row_prefetch.h"
#include "kernels/tile_count.h"
#include "kernels/x86_avx2/hsum_avx2.h"
#include "kernels/x86_avx2/rows8_avx2.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/half.h"

namespace kvlab::kernels::avx2 {
namespace {
using namespace tensor;

inline float h2f(uint16_t h) { return _cvtsh_ss(h); }

// 16 packed bytes of nibbles -> 32 bytes: low nibbles first, then high ones,
// matching the block layout (element j low, element j+16 high).
inline __m256i unpack_nibbles(const uint8_t* qs) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(b, 4), b);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0f));
}

// Sum of 32 products of signed bytes, as 8 int32 lanes in float.
inline __m256 dot_i8_i8(__m256i x, __m256i y) {
  const __m256i ax = _mm256_sign_epi8(x, x);  // |x|, unsigned
  const __m256i sy = _mm256_sign_epi8(y, x);  // y with x's sign
  const __m256i p16 = _mm256_maddubs_epi16(ax, sy);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
inline __m256 dot_u8_i8(__m256i ux, __m256i y) {
  const __m256i p16 = _mm256_maddubs_epi16(ux, y);
  return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

// f32 rows: two multiply-add chains per pair (even and odd 8-element
// halves of each 16), the last whole 8 into the first, the horizontal sum
// of both, then the scalar tail. dots_f32 runs NR weight rows against NP
// activation rows, each pair with these operations in this order, so dot
// (1 x 1), dot4 (1 x 4) and the prefill tile (2 x 3) give the same bits;
// rows4 stays 4 calls of dot. dot4 makes prefill on an f32 copy about 1.2x
// as fast as 4 calls of dot (bench/alternate-bench, pp128 on the copy).
// Results go to
// out[p * out_stride + r]; rows past n_rows repeat the last one and are not
// stored.
template <int NR, int NP>
void dots_f32(const float* const* x, const float* const* y, size_t n, float* out, size_t out_stride = 1,
              size_t n_rows = NR) {
  __m256 acc0[NR][NP], acc1[NR][NP];
  for (int r = 0; r < NR; ++r)
    for (int p = 0; p < NP; ++p) acc0[r][p] = acc1[r][p] = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if constexpr (NR == 1) prefetch_row_ahead(x[0] + i);  // one row streamed from DRAM: dot, dot4
    __m256 x0[NR], x1[NR];
    for (int r = 0; r < NR; ++r) x0[r] = _mm256_loadu_ps(x[r] + i), x1[r] = _mm256_loadu_ps(x[r] + i + 8);
    for (int p = 0; p < NP; ++p) {
      const __m256 y0 = _mm256_loadu_ps(y[p] + i), y1 = _mm256_loadu_ps(y[p] + i + 8);
      for (int r = 0; r < NR; ++r) {
        acc0[r][p] = _mm256_fmadd_ps(x0[r], y0, acc0[r][p]);
        acc1[r][p] = _mm256_fmadd_ps(x1[r], y1, acc1[r][p]);
      }
    }
  }
  const size_t whole = i;
  for (int r = 0; r < NR; ++r)
    for (int p = 0; p < NP; ++p) {
      size_t j = whole;
      for (; j + 8 <= n; j += 8)
        acc0[r][p] = _mm256_fmadd_ps(_mm256_loadu_ps(x[r] + j), _mm256_loadu_ps(y[p] + j), acc0[r][p]);
      float s = hsum(_mm256_add_ps(acc0[r][p], acc1[r][p]));
      for (; j < n; ++j) s += x[r][j] * y[p][j];
      if (size_t(r) < n_rows) out[size_t(p) * out_stride + size_t(r)] = s;
    }
}

float dot_f32(const void* w, const void* a, size_t n) {
  const float* x = static_cast<const float*>(w);
  const float* y = static_cast<const float*>(a);
  float out;
  dots_f32<1, 1>(&x, &y, n, &out);
  return out;
}
// dot4's 4 activation rows, `stride` bytes apart.
template <class T>
std::array<const T*, 4> four_rows(const void* act, size_t stride) {
  std::array<const T*, 4> rows;
  for (int t = 0; t < 4; ++t) rows[t] = reinterpret_cast<const T*>(static_cast<const uint8_t*>(act) + size_t(t) * stride);
  return rows;
}
void dot4_f32(const void* w, const void* act, size_t stride, size_t n, float* out) {
  const float* x = static_cast<const float*>(w);
  dots_f32<1, 4>(&x, four_rows<float>(act, stride).data(), n, out);
}

// 16-bit float rows (f16, bf16): 8 elements widened to f32 per step, one
// fused multiply-add chain per pair of rows, then the horizontal sum and
// the scalar tail. H gives the widening: load (8 elements) and one (1);
// F32Lanes reads activations already widened (the prefill tile's).
struct F16Lanes {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static float one(uint16_t h) { return h2f(h); }
};
struct BF16Lanes {
  using T = uint16_t;
  static __m256 load(const uint16_t* p) {
    const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
  }
  static float one(uint16_t h) { return bf16_to_f32(h); }
};
struct F32Lanes {
  using T = float;
  static __m256 load(const float* p) { return _mm256_loadu_ps(p); }
  static float one(float v) { return v; }
};

// NR weight rows x against NP activation rows y[p] at once (widened by W
// and A). Each pair runs exactly the operations of the one-row case (dot)
// in its order, so dot, dot4 and the tile give the same bits (a token's
// result does not depend on its batch). With 4 activation rows the weights
// are widened once for all of them and the 4 chains run side by side; the
// one-row loop waits on the multiply-add's latency: dot4 makes prefill on f16
// and bf16 copies over 2x as fast. Decode (rows4) keeps 4 calls of dot: the
// rows then stream from DRAM one after another, which reads about 1.9x
// faster than 4 rows side by side (bench/bytes-per-weight measures both).
// Results and rows past n_rows as in dots_f32.
template <class W, class A, int NR, int NP>
void dots_16bit(const uint16_t* const* x, const typename A::T* const* y, size_t n, float* out,
                size_t out_stride = 1, size_t n_rows = NR) {
  __m256 acc[NR][NP];
  for (int r = 0; r < NR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    if constexpr (NR == 1) prefetch_row_ahead(x[0] + i);  // one row streamed from DRAM: dot, dot4
    __m256 vx[NR];
    for (int r = 0; r < NR; ++r) vx[r] = W::load(x[r] + i);
    for (int p = 0; p < NP; ++p) {
      const __m256 vy = A::load(y[p] + i);
      for (int r = 0; r < NR; ++r) acc[r][p] = _mm256_fmadd_ps(vx[r], vy, acc[r][p]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int p = 0; p < NP; ++p) {
      float s = hsum(acc[r][p]);
      for (size_t j = i; j < n; ++j) s += W::one(x[r][j]) * A::one(y[p][j]);
      if (size_t(r) < n_rows) out[size_t(p) * out_stride + size_t(r)] = s;
    }
}

template <class H>
float dot_16bit(const void* w, const void* a, size_t n) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  const uint16_t* y = static_cast<const uint16_t*>(a);
  float out;
  dots_16bit<H, H, 1, 1>(&x, &y, n, &out);
  return out;
}
template <class H>
void dot4_16bit(const void* w, const void* act, size_t stride, size_t n, float* out) {
  const uint16_t* x = static_cast<const uint16_t*>(w);
  dots_16bit<H, H, 1, 4>(&x, four_rows<uint16_t>(act, stride).data(), n, out);
}

// The prefill tiles (DotKernel::float_tile, kernels/float_tiles.h), in the
// 16 registers: f32 2 rows x 3 tokens (12 accumulators, 4 row halves, an
// activation half), 16-bit 2 rows x 6 tokens (12, 2, 1), with f32
// activations (tile_act).
void tile_f32(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows, size_t n_tokens,
              size_t n, float* y, size_t y_stride) {
  for_each_float_tile<float, float, 2, 3>(
      w, w_stride, act, act_stride, n_rows, n_tokens, y, y_stride,
      [&]<int NT>(const float* const* rows, const float* const* tokens, size_t nr, float* yt) {
        dots_f32<2, NT>(rows, tokens, n, yt, y_stride, nr);
      });
}
template <class H>
void tile_16bit(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows, size_t n_tokens,
                size_t n, float* y, size_t y_stride) {
  for_each_float_tile<uint16_t, float, 2, 6>(
      w, w_stride, act, act_stride, n_rows, n_tokens, y, y_stride,
      [&]<int NT>(const uint16_t* const* rows, const float* const* tokens, size_t nr, float* yt) {
        dots_16bit<H, F32Lanes, 2, NT>(rows, tokens, n, yt, y_stride, nr);
      });
}

// Quantized blocks, NR weight rows against NT activation rows at once. Each
// (row, activation) pair has its own accumulator and sees exactly the
// operations of the 1x1 kernel in the same order, so results do not depend on
// NR or NT (a token's logits do not depend on its batch). NT > 1 (prefill)
// decodes each weight block once for NT tokens; NR > 1 (decode) runs NR
// independent FMA chains, hiding their latency while the rows stream in, and
// prefetches the next NR rows at the same column: one row group ahead keeps
// DRAM busy while this group is multiplied (the 49152 x 576 q8_0 LM head,
// 30 MB, went from ~5.0 to ~2.2-2.8 ms on one thread).
//
// A kind K gives, per block: `unpack`, the weight's 32 values as bytes;
// `product`, their products with 32 activation bytes as 8 int32 sums (in
// float); and `scales`, the block's two f16 header values widened in one
// instruction (q4_1: d, m; q8_1: d, s). Their product is (d_w*d_x, m_w*s_x):
// lane 0 scales the integer sums, lane 1 is the block's constant term
// (Q4_1's minimum), summed apart when K::kOffset.
template <int NR, int NT, class K>
inline void dot_blocks(const uint8_t* w, size_t w_stride, const uint8_t* act, size_t a_stride, size_t n, float* out) {
  using W = typename K::W;
  using A = typename K::A;
  __m256 acc[NR][NT];
  __m128 off[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm256_setzero_ps(), off[r][t] = _mm_setzero_ps();
  for (size_t b = 0; b < n / kQK; ++b) {
    __m128 ys[NT];
    for (int t = 0; t < NT; ++t) ys[t] = K::scales(reinterpret_cast<const A*>(act + size_t(t) * a_stride)[b]);
    for (int r = 0; r < NR; ++r) {
      const W& x = reinterpret_cast<const W*>(w + size_t(r) * w_stride)[b];
      if constexpr (NR > 1) _mm_prefetch(reinterpret_cast<const char*>(&x) + NR * w_stride, _MM_HINT_T0);
      const __m256i qx = K::unpack(x);
      const __m128 xs = K::scales(x);
      for (int t = 0; t < NT; ++t) {
        const A& y = reinterpret_cast<const A*>(act + size_t(t) * a_stride)[b];
        const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
        const __m128 sc = _mm_mul_ps(xs, ys[t]);
        acc[r][t] = _mm256_fmadd_ps(_mm256_broadcastss_ps(sc), K::product(qx, qy), acc[r][t]);
        if constexpr (K::kOffset) off[r][t] = _mm_add_ps(off[r][t], sc);
      }
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      out[r * NT + t] = hsum(acc[r][t]);
      if constexpr (K::kOffset) out[r * NT + t] += _mm_cvtss_f32(_mm_movehdup_ps(off[r][t]));
    }
}

// Two consecutive f16 values (a block's header) widened to lanes 0 and 1.
inline __m128 half_pair(const uint16_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof bits);
  return _mm_cvtph_ps(_mm_cvtsi32_si128(int(bits)));
}
// One f16 value in lane 0 (blocks without a second header value).
inline __m128 half_one(uint16_t h) { return _mm_cvtph_ps(_mm_cvtsi32_si128(h)); }

struct Q8_0Kind {
  using W = BlockQ8_0;
  using A = BlockQ8_0;
  static constexpr bool kOffset = false;
  static __m256i unpack(const W& b) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs)); }
  static __m256 product(__m256i x, __m256i y) { return dot_i8_i8(x, y); }
  static __m128 scales(const BlockQ8_0& b) { return half_one(b.d); }
};
struct Q4_0Kind {
  using W = BlockQ4_0;
  using A = BlockQ8_0;
  static constexpr bool kOffset = false;
  static __m256i unpack(const W& b) { return _mm256_sub_epi8(unpack_nibbles(b.qs), _mm256_set1_epi8(8)); }
  static __m256 product(__m256i x, __m256i y) { return dot_i8_i8(x, y); }
  static __m128 scales(const BlockQ4_0& b) { return half_one(b.d); }
  static __m128 scales(const BlockQ8_0& b) { return half_one(b.d); }
};
// Q4_1's minimum: sum(m * x) = m * s with s = d_x * sum(q_x), the q8_1 block's s.
struct Q4_1Kind {
  using W = BlockQ4_1;
  using A = BlockQ8_1;
  static constexpr bool kOffset = true;
  static __m256i unpack(const W& b) { return unpack_nibbles(b.qs); }
  static __m256 product(__m256i x, __m256i y) { return dot_u8_i8(x, y); }
  static __m128 scales(const BlockQ4_1& b) { return half_pair(&b.d); }
  static __m128 scales(const BlockQ8_1& b) { return half_pair(&b.d); }
};

// Q5's fifth bits: bit j of the 32-bit qh as 0x10 in byte lane j, matching
// unpack_nibbles' element order. Each lane picks qh's byte j / 8 and tests bit j % 8.
inline __m256i q5_high_bits(const uint8_t qh[4]) {
  uint32_t h;
  std::memcpy(&h, qh, sizeof h);
  const __m256i byte_of_lane = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  const __m256i bit_of_lane = _mm256_set1_epi64x(int64_t(0x8040201008040201));
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(int(h)), byte_of_lane), bit_of_lane);
  return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit_of_lane), _mm256_set1_epi8(0x10));
}
struct Q5_0Kind {
  using W = BlockQ5_0;
  using A = BlockQ8_0;
  static constexpr bool kOffset = false;
  static __m256i unpack(const W& b) {
    return _mm256_sub_epi8(_mm256_or_si256(unpack_nibbles(b.qs), q5_high_bits(b.qh)), _mm256_set1_epi8(16));
  }
  static __m256 product(__m256i x, __m256i y) { return dot_i8_i8(x, y); }
  static __m128 scales(const BlockQ5_0& b) { return half_one(b.d); }
  static __m128 scales(const BlockQ8_0& b) { return half_one(b.d); }
};
// u5 x s8 pairs: at most 2*31*127 = 7874 per vpmaddubsw lane.
struct Q5_1Kind {
  using W = BlockQ5_1;
  using A = BlockQ8_1;
  static constexpr bool kOffset = true;
  static __m256i unpack(const W& b) { return _mm256_or_si256(unpack_nibbles(b.qs), q5_high_bits(b.qh)); }
  static __m256 product(__m256i x, __m256i y) { return dot_u8_i8(x, y); }
  static __m128 scales(const BlockQ5_1& b) { return half_pair(&b.d); }
  static __m128 scales(const BlockQ8_1& b) { return half_pair(&b.d); }
};

template <class K>
struct Tiles {
  template <int NR, int NT>
  static void run(const void* w, size_t w_stride, const void* a, size_t a_stride, size_t n, float* out) {
    dot_blocks<NR, NT, K>(static_cast<const uint8_t*>(w), w_stride, static_cast<const uint8_t*>(a), a_stride, n, out);
  }
};

// ---- rows of 8 (kernels/rows8.h) -------------------------------------------
// One column block of a group holds the 8 rows' f16 headers, then their quant
// bytes in 32-byte runs of 4 bytes per row. A kernel takes a block in two
// halves: `load_half(blk, h, w)` turns it into 4 vectors w[i] whose lane r
// holds 4 quants of row r, paired with activation bytes 16h+4i..16h+4i+3, so
// a broadcast of those 4 bytes multiplies all 8 rows; `half_sum` adds up a
// half's products and `block_sum` joins the two halves into row r's exact
// integer block sum in lane r, with no horizontal step. The scaling then
// repeats the scalar reference's float operations lane by lane, in its order
// (dot_scalar.cpp), so results equal it bit for bit. Halves rather than whole
// blocks keep 4 weight vectors live instead of 8: with 4 tokens' accumulators
// and sums that fits the 16 ymm registers, where whole blocks spilled the
// accumulators to the stack (perf annotate of pp512: 25% of the kernel's
// samples on those stores and reloads).

inline __m256i ones16() { return _mm256_set1_epi16(1); }
// The 4 vpmaddubsw products of a half (unsigned weights w against signed
// activations), added in int16: the caller checks they cannot overflow.
inline __m256i half_maddubs(const __m256i w[4], const int8_t* qx) {
  __m256i p = _mm256_maddubs_epi16(w[0], broadcast4(qx));
  for (int i = 1; i < 4; ++i) {
    p = _mm256_add_epi16(p, _mm256_maddubs_epi16(w[i], broadcast4(qx + 4 * i)));
    in_order(p);
  }
  return p;
}
// s8 weights: the sign trick moves each weight's sign onto its activation.
inline __m256i abs_signed(const __m256i w[4], const int8_t* qx, int i) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(w[i], w[i]), _mm256_sign_epi8(broadcast4(qx + 4 * i), w[i]));
}
inline __m256i half_maddubs_signed(const __m256i w[4], const int8_t* qx) {
  __m256i p = abs_signed(w, qx, 0);
  for (int i = 1; i < 4; ++i) {
    p = _mm256_add_epi16(p, abs_signed(w, qx, i));
    in_order(p);
  }
  return p;
}
// Runs 0..3 of a q4 block: half 0 is their low nibbles (elements 4c..4c+3),
// half 1 their high nibbles (16+4c..).
inline void load_nibbles(const uint8_t* runs, int h, __m256i w[4]) {
  const __m256i mask = _mm256_set1_epi8(0x0f);
  for (int c = 0; c < 4; ++c) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(runs + 32 * c));
    w[c] = _mm256_and_si256(h ? _mm256_srli_epi16(v, 4) : v, mask);
  }
}

// q4_1 x q8_1: float(sumi) * (d_w*d_x) + m_w*s_x per block. u4 x s8 pairs:
// each vpmaddubsw lane is at most 2*15*127 = 3810 in magnitude, so all eight
// of a block add up in int16 (30480 < 32767).
struct Q4_1Rows8 {
  using A = BlockQ8_1;
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ4_1);
  struct Scales {
    __m256 d, m;
  };
  static Scales scales(const uint8_t* blk) { return {load_halves8(blk), load_halves8(blk + 16)}; }
  static void load_half(const uint8_t* blk, int h, __m256i w[4]) { load_nibbles(blk + 32, h, w); }
  static __m256i half_sum(const __m256i w[4], const int8_t* qx) { return half_maddubs(w, qx); }
  static __m256i block_sum(__m256i lo, __m256i hi) { return _mm256_madd_epi16(_mm256_add_epi16(lo, hi), ones16()); }
  // xs: the activation block's d and s as f32 (rows8_act_scales).
  static __m256 accumulate(__m256 acc, __m256 sum, const Scales& s, const float* xs) {
    const __m256 dd = _mm256_mul_ps(s.d, _mm256_broadcast_ss(xs));
    return _mm256_fmadd_ps(sum, dd, _mm256_fmadd_ps(s.m, _mm256_broadcast_ss(xs + 1), acc));
  }
};

// q8_0 x q8_0: float(sumi) * (d_w*d_x) per block. s8 x s8 through the sign
// trick; a pair can reach 2*128*127 = 32512, so each vpmaddubsw result is
// widened to int32 before the next is added.
struct Q8_0Rows8 {
  using A = BlockQ8_0;
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ8_0);
  struct Scales {
    __m256 d;
  };
  static Scales scales(const uint8_t* blk) { return {load_halves8(blk)}; }
  static void load_half(const uint8_t* blk, int h, __m256i w[4]) {
    for (int i = 0; i < 4; ++i) w[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 16 + 32 * (4 * h + i)));
  }
  static __m256i half_sum(const __m256i w[4], const int8_t* qx) {
    __m256i s = _mm256_madd_epi16(abs_signed(w, qx, 0), ones16());
    for (int i = 1; i < 4; ++i) {
      s = _mm256_add_epi32(s, _mm256_madd_epi16(abs_signed(w, qx, i), ones16()));
      in_order(s);
    }
    return s;
  }
  static __m256i block_sum(__m256i lo, __m256i hi) { return _mm256_add_epi32(lo, hi); }
  static __m256 accumulate(__m256 acc, __m256 sum, const Scales& s, const float* xs) {
    return _mm256_fmadd_ps(sum, _mm256_mul_ps(s.d, _mm256_broadcast_ss(xs)), acc);
  }
};

// q4_0 x q8_0: float(sumi) * (d_w*d_x) per block, with the quants q - 8 in
// -8..7: the sign trick of q8_0, and eight vpmaddubsw results still add up
// in int16 (each at most 2*8*127 = 2032 in magnitude).
struct Q4_0Rows8 {
  using A = BlockQ8_0;
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ4_0);
  using Scales = Q8_0Rows8::Scales;
  static Scales scales(const uint8_t* blk) { return Q8_0Rows8::scales(blk); }
  static void load_half(const uint8_t* blk, int h, __m256i w[4]) {
    load_nibbles(blk + 16, h, w);
    for (int i = 0; i < 4; ++i) w[i] = _mm256_sub_epi8(w[i], _mm256_set1_epi8(8));
  }
  static __m256i half_sum(const __m256i w[4], const int8_t* qx) { return half_maddubs_signed(w, qx); }
  static __m256i block_sum(__m256i lo, __m256i hi) { return Q4_1Rows8::block_sum(lo, hi); }
  static __m256 accumulate(__m256 acc, __m256 sum, const Scales& s, const float* xs) {
    return Q8_0Rows8::accumulate(acc, sum, s, xs);
  }
};

// q5_0 / q5_1: the 32-byte run after the headers holds row r's 32 fifth bits
// in lane r; the four nibble runs follow. Bit e of the word is element e's
// fifth bit: for run c, elements 4c..4c+3 sit in the low nibbles (bits 4c..
// in byte c/2) and 16+4c.. in the high nibbles (byte 2 + c/2). Each lane's
// byte is copied to its 4 bytes, and byte k tests bit k (+4 for odd c).
inline __m256i fifth_bits(__m256i words, int byte, int odd) {
  const __m256i copy = _mm256_add_epi8(
      _mm256_setr_epi8(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12, 0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12),
      _mm256_set1_epi8(char(byte)));
  const __m256i bit = _mm256_set1_epi32(odd ? int(0x80402010) : 0x08040201);
  const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(words, copy), bit);
  return _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), _mm256_set1_epi8(0x10));
}
template <int kHalves>
inline void load_q5_half(const uint8_t* blk, int h, __m256i w[4]) {
  const uint8_t* body = blk + 16 * kHalves;
  const __m256i words = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(body));
  load_nibbles(body + 32, h, w);
  for (int c = 0; c < 4; ++c) w[c] = _mm256_or_si256(w[c], fifth_bits(words, 2 * h + c / 2, c % 2));
}

// q5_0 x q8_0: float(sumi) * (d_w*d_x) per block, quants q - 16 in -16..15:
// the sign trick, and eight vpmaddubsw results (each at most 2*16*127 = 4064)
// still add up in int16 (32512 < 32767).
struct Q5_0Rows8 {
  using A = BlockQ8_0;
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ5_0);
  using Scales = Q8_0Rows8::Scales;
  static Scales scales(const uint8_t* blk) { return Q8_0Rows8::scales(blk); }
  static void load_half(const uint8_t* blk, int h, __m256i w[4]) {
    load_q5_half<1>(blk, h, w);
    for (int i = 0; i < 4; ++i) w[i] = _mm256_sub_epi8(w[i], _mm256_set1_epi8(16));
  }
  static __m256i half_sum(const __m256i w[4], const int8_t* qx) { return half_maddubs_signed(w, qx); }
  static __m256i block_sum(__m256i lo, __m256i hi) { return Q4_1Rows8::block_sum(lo, hi); }
  static __m256 accumulate(__m256 acc, __m256 sum, const Scales& s, const float* xs) {
    return Q8_0Rows8::accumulate(acc, sum, s, xs);
  }
};

// q5_1 x q8_1: as q4_1, with u5 x s8 pairs of at most 2*31*127 = 7874: four
// add up in int16 (31496), so each half is widened on its own.
struct Q5_1Rows8 {
  using A = BlockQ8_1;
  static constexpr size_t kBlockBytes = 8 * sizeof(BlockQ5_1);
  using Scales = Q4_1Rows8::Scales;
  static Scales scales(const uint8_t* blk) { return Q4_1Rows8::scales(blk); }
  static void load_half(const uint8_t* blk, int h, __m256i w[4]) { load_q5_half<2>(blk, h, w); }
  static __m256i half_sum(const __m256i w[4], const int8_t* qx) {
    return _mm256_madd_epi16(half_maddubs(w, qx), ones16());
  }
  static __m256i block_sum(__m256i lo, __m256i hi) { return _mm256_add_epi32(lo, hi); }
  static __m256 accumulate(__m256 acc, __m256 sum, const Scales& s, const float* xs) {
    return Q4_1Rows8::accumulate(acc, sum, s, xs);
  }
};

// One group against NT tokens: each half block's weights are unpacked once
// and meet all NT activation rows.
template <class K, int NT>
void rows8_tokens(const uint8_t* group, const uint8_t* act, size_t a_stride, const float* scales, size_t s_stride,
                  size_t n, float* y, size_t y_stride) {
  using A = typename K::A;
  // Unrolled before GCC's scalar replacement of aggregates, so acc[] and
  // sum[] become registers instead of stack slots (without: each token's
  // accumulator went through a store and a reload every block).
  __m256 acc[NT];
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) acc[t] = _mm256_setzero_ps();
  for (size_t b = 0; b < n / kQK; ++b) {
    const uint8_t* blk = group + b * K::kBlockBytes;
    prefetch_ahead(blk, K::kBlockBytes);
    const auto qs = [&](int t) { return reinterpret_cast<const A*>(act + size_t(t) * a_stride)[b].qs; };
    __m256i w[4], sum[NT];
    K::load_half(blk, 0, w);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) sum[t] = K::half_sum(w, qs(t));
    K::load_half(blk, 1, w);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t) sum[t] = K::block_sum(sum[t], K::half_sum(w, qs(t) + kQK / 2));
    const typename K::Scales s = K::scales(blk);
#pragma GCC unroll 4
    for (int t = 0; t < NT; ++t)
      acc[t] = K::accumulate(acc[t], _mm256_cvtepi32_ps(sum[t]), s, scales + size_t(t) * s_stride + 2 * b);
  }
#pragma GCC unroll 4
  for (int t = 0; t < NT; ++t) _mm256_storeu_ps(y + size_t(t) * y_stride, acc[t]);
}

template <class K>
void rows8(const void* group, const void* act, size_t a_stride, const float* scales, size_t s_stride, size_t n_tokens,
           size_t n, float* y, size_t y_stride) {
  with_tile_count<4>(n_tokens, [&]<int NT>() {
    rows8_tokens<K, NT>(static_cast<const uint8_t*>(group), static_cast<const uint8_t*>(act), a_stride, scales, s_stride,
                        n, y, y_stride);
  });
}

// ---- activation quantization: same arithmetic as the scalar reference
// (127/amax, round half to even), so the bytes are identical ----------------

inline float block_amax(const float* x) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_andnot_ps(sign, _mm256_loadu_ps(x));
  for (int j = 8; j < kQK; j += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + j)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
// Rounds 32 floats * id to int8 and returns their sum. vcvtps2dq rounds in
// the current mode, round to nearest even unless changed, as std::nearbyint
// in the reference does.
inline int quantize_block(const float* x, float id, int8_t* q) {
  const __m256 vid = _mm256_set1_ps(id);
  __m256i i32[4];
  for (int k = 0; k < 4; ++k) i32[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 8 * k), vid));
  // Pack 4x8 int32 -> 32 int8; packs interleave 128-bit lanes, undo with a permute.
  const __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]), p16b = _mm256_packs_epi32(i32[2], i32[3]);
  const __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), p8);
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]), _mm256_add_epi32(i32[2], i32[3]));
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
  h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 1));
  return _mm_cvtsi128_si32(h);
}
// a and b to f16 with F16C, rounding to nearest even as f32_to_f16 does, in
// one conversion: the scalar f32_to_f16 with its range checks was a third
// of the q8_1 quantizer's instructions.
inline std::array<uint16_t, 2> to_f16_pair(float a, float b) {
  const uint32_t h = uint32_t(_mm_cvtsi128_si32(_mm_cvtps_ph(_mm_setr_ps(a, b, 0.f, 0.f), _MM_FROUND_TO_NEAREST_INT)));
  return {uint16_t(h), uint16_t(h >> 16)};
}
void quantize_q8_0(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockQ8_0*>(out);
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float amax = block_amax(x);
    b[i].d = to_f16_pair(amax / 127.f, 0.f)[0];
    quantize_block(x, amax != 0.f ? 127.f / amax : 0.f, b[i].qs);
  }
}
void quantize_q8_1(const float* x, void* out, size_t n) {
  auto* b = static_cast<BlockQ8_1*>(out);
  for (size_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float amax = block_amax(x);
    const float d = amax / 127.f;
    const int sum = quantize_block(x, amax != 0.f ? 127.f / amax : 0.f, b[i].qs);
    const auto [hd, hs] = to_f16_pair(d, float(sum) * d);
    b[i].d = hd;
    b[i].s = hs;
  }
}

constexpr DotKernel with_tile(DotKernel k, FloatTile tile) {
  k.float_tile = tile;
  return k;
}
const DotKernel kF32 = with_tile({ActFormat::F32, quantize_row_f32, dot_f32, dot4_f32, rows4_by_rows<dot_f32>}, tile_f32);
// f32 -> f16 with F16C, rounding to nearest even as f32_to_f16 does, so the
// bytes are the scalar reference's (this also fills the f16 KV cache).
void quantize_f16(const float* x, void* out, size_t n) {
  auto* h = static_cast<uint16_t*>(out);
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(h + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  for (; i < n; ++i) h[i] = f32_to_f16(x[i]);
}

const DotKernel kF16 = with_tile({ActFormat::F16, quantize_f16, dot_16bit<F16Lanes>, dot4_16bit<F16Lanes>,
                                  rows4_by_rows<dot_16bit<F16Lanes>>},
                                 tile_16bit<F16Lanes>);
const DotKernel kBF16 = with_tile({ActFormat::BF16, quantize_row_bf16, dot_16bit<BF16Lanes>, dot4_16bit<BF16Lanes>,
                                   rows4_by_rows<dot_16bit<BF16Lanes>>},
                                  tile_16bit<BF16Lanes>);
const DotKernel kQ8_0{ActFormat::Q8_0, quantize_q8_0, dot_1x1<Tiles<Q8_0Kind>>, dot_1x4<Tiles<Q8_0Kind>>, dot_4x1<Tiles<Q8_0Kind>>,
                      rows8<Q8_0Rows8>};
const DotKernel kQ4_0{ActFormat::Q8_0, quantize_q8_0, dot_1x1<Tiles<Q4_0Kind>>, dot_1x4<Tiles<Q4_0Kind>>, dot_4x1<Tiles<Q4_0Kind>>,
                      rows8<Q4_0Rows8>};
const DotKernel kQ4_1{ActFormat::Q8_1, quantize_q8_1, dot_1x1<Tiles<Q4_1Kind>>, dot_1x4<Tiles<Q4_1Kind>>, dot_4x1<Tiles<Q4_1Kind>>,
                      rows8<Q4_1Rows8>};
const DotKernel kQ5_0{ActFormat::Q8_0, quantize_q8_0, dot_1x1<Tiles<Q5_0Kind>>, dot_1x4<Tiles<Q5_0Kind>>, dot_4x1<Tiles<Q5_0Kind>>,
                      rows8<Q5_0Rows8>};
const DotKernel kQ5_1{ActFormat::Q8_1, quantize_q8_1, dot_1x1<Tiles<Q5_1Kind>>, dot_1x4<Tiles<Q5_1Kind>>, dot_4x1<Tiles<Q5_1Kind>>,
                      rows8<Q5_1Rows8>};

}  // namespace

const DotKernel* find(DType w) {
  switch (w) {
    case DType::F32: return &kF32;
    case DType::F16: return &kF16;
    case DType::BF16: return &kBF16;
    case DType::Q8_0: return &kQ8_0;
    case DType::Q4_0: return &kQ4_0;
    case DType::Q4_1: return &kQ4_1;
    case DType::Q5_0: return &kQ5_0;
    case DType::Q5_1: return &kQ5_1;
    default: return find_kquant(w);  // dot_kquants_avx2.cpp
  }
}

}  // namespace kvlab::kernels::avx2
