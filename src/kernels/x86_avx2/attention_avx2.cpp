// AVX2/FMA/F16C attention pieces (see attention.h). Every K and V row is
// widened to f32 once and used for all the query heads of its group, which
// stay in registers (up to 4 heads at a time); an f16 K's tiles are scored
// 8 positions per vector, a q8_0 K's likewise as integers.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention_rows.h"
#include "kernels/dot.h"
#include "kernels/kv_tiles.h"
#include "kernels/tile_count.h"
#include "kernels/x86_avx2/exp_avx2.h"
#include "kernels/x86_avx2/hsum_avx2.h"
#include "tensor/blocks.h"

namespace kvlab::kernels::avx2 {
namespace {

using tensor::DType;

// 8 consecutive elements of an f32 or f16 row from element d, widened to f32.
template <DType T>
__m256 load8(const uint8_t* row, size_t d) {
  if constexpr (T == DType::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + d);
  } else {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * d)));
  }
}
// 8 int8 quants from p, widened to f32.
inline __m256 load8_q8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// q rounded to f16 and back: f16 K meets f16 q, as in the f16 matmul.
void prepare_q_f16(const float* q, size_t head_dim, void* out) {
  auto* o = static_cast<float*>(out);
  size_t d = 0;
  for (; d + 8 <= head_dim; d += 8)
    _mm256_storeu_ps(o + d, _mm256_cvtph_ps(_mm256_cvtps_ph(_mm256_loadu_ps(q + d), _MM_FROUND_TO_NEAREST_INT)));
  for (; d < head_dim; ++d) o[d] = _cvtsh_ss(_cvtss_sh(q[d], _MM_FROUND_TO_NEAREST_INT));
}
// q as q8_0 blocks, the activation format of the q8_0 dot product.
void prepare_q_q8_0(const float* q, size_t head_dim, void* out) {
  dot_kernel(DType::Q8_0).quantize_act(q, out, head_dim);
}
void prepare_q_f32(const float* q, size_t head_dim, void* out) {
  auto* o = static_cast<float*>(out);
  for (size_t d = 0; d < head_dim; ++d) o[d] = q[d];
}

// The sums of 4 vectors, in order, as one vector of 4. Every vector goes
// through the same additions whichever slot it is in, so a score does not
// depend on where its row falls in a tile.
__m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 h = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
}

// Accumulators i .. i+3 of a tile (head g, row r at g*NR + r) summed into
// `sums` and scaled: each lane goes to its head's and row's score straight
// from the register. Through a float array, GCC read the array back as one
// 32-byte load spanning two 16-byte stores, which store-to-load forwarding
// cannot serve: a fifth of the 4-head f16 tile's time stalled there. The
// loops here and at the callers are unrolled so every index is a constant:
// otherwise the accumulator array lives on the stack, not in registers.
template <int NG, int NR>
inline void store_scores4(int i, __m128 sums, __m128 scale, float* s, size_t ld) {
  const __m128 h = _mm_mul_ps(sums, scale);
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k)
    if (i + k < NG * NR) s[size_t((i + k) / NR) * ld + size_t((i + k) % NR)] = h[k];
}

// Rows per scores tile for NG heads: the NR*NG accumulators, NR converted
// rows and one q vector must fit the 16 ymm registers. One more spills an
// accumulator to the stack, and its store-to-load round trip then limits the
// loop (perf: 3 heads x 4 rows spent 30% of the kernel on that spill). 4
// heads x 3 rows fill exactly 16 (objdump: no spill) and beat 4 x 2
// (attend/f16/pos:1024/group:4, best of 4 alternating rounds: 23.4 -> 19.4
// us; group:8 46.8 -> 38.1).
template <int NG>
constexpr int kScoreRows = NG <= 2 ? 4 : 3;

// Scores of NG heads against NR rows, then the horizontal sums four
// vectors at a time; head_dim a multiple of 8.
template <DType T, int NG, int NR>
void scores_tile(const float* q, size_t q_stride, const uint8_t* const r[NR], size_t head_dim, float* s, size_t ld,
                 float scale_) {
  __m256 a[NG * NR];
  for (int i = 0; i < NG * NR; ++i) a[i] = _mm256_setzero_ps();
  for (size_t d = 0; d < head_dim; d += 8) {
    __m256 x[NR];
    for (int i = 0; i < NR; ++i) x[i] = load8<T>(r[i], d);
    for (int g = 0; g < NG; ++g) {
      const __m256 qv = _mm256_loadu_ps(q + size_t(g) * q_stride + d);
      for (int i = 0; i < NR; ++i) a[g * NR + i] = _mm256_fmadd_ps(x[i], qv, a[g * NR + i]);
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  const __m128 sc = _mm_set1_ps(scale_);
#pragma GCC unroll 4
  for (int i = 0; i < NG * NR; i += 4) {
    auto at = [&](int k) { return k < NG * NR ? a[k] : zero; };
    store_scores4<NG, NR>(i, hsum4(at(i), at(i + 1), at(i + 2), at(i + 3)), sc, s, ld);
  }
}

template <DType T, int NG>
void scores_rows(const float* q, size_t q_stride, const uint8_t* k, const uint8_t* v, size_t row_stride, int n,
                 size_t head_dim, float scale_, float* s, size_t ld) {
  constexpr int NR = kScoreRows<NG>;
  score_tiles<NG, NR>(k, v, row_stride, n, s, ld, [&](const uint8_t* const rows[NR], float* out, size_t out_ld) {
    scores_tile<T, NG, NR>(q, q_stride, rows, head_dim, out, out_ld, scale_);
  });
}

template <DType T>
void scores(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t* v, size_t row_stride, int n,
            size_t head_dim, float scale_, float* s, size_t ld) {
  const size_t qs = q_stride / sizeof(float);
  for_each_tile<kAttnHeadsPerPass>(size_t(group), [&]<int NG>(size_t g0) {
    scores_rows<T, NG>(static_cast<const float*>(q) + g0 * qs, qs, k, v, row_stride, n, head_dim, scale_, s + g0 * ld,
                       ld);
  });
}

// f16 K in position-minor tiles (kernels/kv_tiles.h) against q rounded to
// f16 (prepare_q_f16). Element d of a tile's 16 positions is two 16-byte
// loads, widened to 8 floats each, times each head's q[d] broadcast and
// added into that head's 16 scores: no horizontal sums, 2 x NG independent
// sums in flight, one broadcast per head and element for both halves. Every
// lane adds the elements in order, so a score does not depend on where its
// position falls in a tile.
template <int NG>
void scores_tile_f16(const uint8_t* q, size_t q_stride, const uint8_t* tile, size_t head_dim, float* s, size_t ld,
                     float scale_) {
  __m256 acc[NG][2];
  for (int g = 0; g < NG; ++g) acc[g][0] = acc[g][1] = _mm256_setzero_ps();
  for (size_t d = 0; d < head_dim; ++d) {
    const uint8_t* at = tile + k_tile_f16_at(d, 0);
    if (d % 2 == 0) prefetch_stream(at);  // a line per two elements
    const __m256 lo = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at)));
    const __m256 hi = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(at + 16)));
    for (int g = 0; g < NG; ++g) {
      const __m256 qd = _mm256_broadcast_ss(reinterpret_cast<const float*>(q + size_t(g) * q_stride) + d);
      acc[g][0] = _mm256_fmadd_ps(lo, qd, acc[g][0]);
      acc[g][1] = _mm256_fmadd_ps(hi, qd, acc[g][1]);
    }
  }
  const __m256 sc = _mm256_set1_ps(scale_);
  for (int g = 0; g < NG; ++g) {
    _mm256_storeu_ps(s + size_t(g) * ld, _mm256_mul_ps(acc[g][0], sc));
    _mm256_storeu_ps(s + size_t(g) * ld + 8, _mm256_mul_ps(acc[g][1], sc));
  }
}

void scores_f16(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t*, size_t row_stride, int n,
                size_t head_dim, float scale_, float* s, size_t ld) {
  walk_k_tiles(q, q_stride, group, k, row_stride, n, s, ld, [&]<int NG>(const uint8_t* qg, const uint8_t* tile, float* sg) {
    scores_tile_f16<NG>(qg, q_stride, tile, head_dim, sg, ld, scale_);
  });
}

// q8_0 K in position-minor tiles (kernels/kv_tiles.h) against q as q8_0
// blocks (prepare_q). One vector of a tile holds 4 elements of 8 positions;
// its 4-element integer dots with a head's q (sign trick, vpmaddubsw,
// vpmaddwd) add into 32-bit lanes, one per position, so a block's sums need
// no horizontal reduction, and the 8 positions' K scales times d_q scale
// them as one vector.
template <int NG>
void scores_tile_q8(const uint8_t* q, size_t q_stride, const uint8_t* tile, size_t head_dim, float* s, size_t ld,
                    float scale_) {
  using tensor::BlockQ8_0;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int half = 0; half < kKvTileRows; half += 8) {
    __m256 acc[NG];
    for (int g = 0; g < NG; ++g) acc[g] = _mm256_setzero_ps();
    for (size_t b = 0; b < head_dim / tensor::kQK; ++b) {
      __m256i dot[NG];
      for (int g = 0; g < NG; ++g) dot[g] = _mm256_setzero_si256();
      for (size_t c = 0; c < tensor::kQK / 4; ++c) {
        const uint8_t* at = tile + k_tile_quad_at(head_dim, b * (tensor::kQK / 4) + c, half);
        if (half == 0) prefetch_stream(at);  // the two halves are one line
        const __m256i k = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
        const __m256i kabs = _mm256_sign_epi8(k, k);
        for (int g = 0; g < NG; ++g) {
          int32_t quad;
          std::memcpy(&quad, reinterpret_cast<const BlockQ8_0*>(q + size_t(g) * q_stride)[b].qs + 4 * c, 4);
          const __m256i qs = _mm256_sign_epi8(_mm256_set1_epi32(quad), k);
          dot[g] = _mm256_add_epi32(dot[g], _mm256_madd_epi16(_mm256_maddubs_epi16(kabs, qs), ones));
        }
      }
      if (half == 0) prefetch_stream(tile + tile_scale_at(b, 0));
      const __m256 dk =
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + tile_scale_at(b, half))));
      for (int g = 0; g < NG; ++g) {
        const float dq = _cvtsh_ss(reinterpret_cast<const BlockQ8_0*>(q + size_t(g) * q_stride)[b].d);
        acc[g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[g]), _mm256_mul_ps(dk, _mm256_set1_ps(dq)), acc[g]);
      }
    }
    const __m256 sc = _mm256_set1_ps(scale_);
    for (int g = 0; g < NG; ++g) _mm256_storeu_ps(s + size_t(g) * ld + size_t(half), _mm256_mul_ps(acc[g], sc));
  }
}

void scores_q8_0(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t*, size_t row_stride, int n,
                 size_t head_dim, float scale_, float* s, size_t ld) {
  walk_k_tiles(q, q_stride, group, k, row_stride, n, s, ld, [&]<int NG>(const uint8_t* qg, const uint8_t* tile, float* sg) {
    scores_tile_q8<NG>(qg, q_stride, tile, head_dim, sg, ld, scale_);
  });
}

// o_g[d0 .. d0+8*NV) += sum_j p_gj v_j[d0 .. d0+8*NV) for NG heads: the
// NG x NV accumulators stay in registers across all n rows, with the NG
// broadcast probabilities and one row vector at a time (NG*NV + NG + 1 <= 16).
template <DType T, int NG, int NV>
void accumulate_block(const float* p, size_t ld, const uint8_t* v, size_t row_stride, int n, size_t head_dim, size_t d0,
                      float* o) {
  __m256 acc[NG][NV];
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) acc[g][i] = _mm256_loadu_ps(o + size_t(g) * head_dim + d0 + 8 * size_t(i));
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = v + size_t(j) * row_stride;
    if constexpr (T == DType::F16) prefetch_stream(row + 2 * d0);  // the pass's 16 * NV bytes: a line at most
    __m256 b[NG];
    for (int g = 0; g < NG; ++g) b[g] = _mm256_set1_ps(p[size_t(g) * ld + size_t(j)]);
    for (int i = 0; i < NV; ++i) {
      const __m256 x = load8<T>(row, d0 + 8 * size_t(i));
      for (int g = 0; g < NG; ++g) acc[g][i] = _mm256_fmadd_ps(b[g], x, acc[g][i]);
    }
  }
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(o + size_t(g) * head_dim + d0 + 8 * size_t(i), acc[g][i]);
}

// The same for q8_0 V tiles (kv_tiles.h), one block per pass: per tile, the
// NG heads' weights p x the block scale for its 16 rows as vector
// multiplies (a zero p gives a zero weight, whatever the row holds), then
// each row's multiply-adds with their weights broadcast from memory.
template <int NG, int NV>
void accumulate_tiles_q8(const float* p, size_t ld, const uint8_t* v, size_t row_stride, int n, size_t head_dim,
                         size_t d0, float* o) {
  static_assert(8 * NV <= tensor::kQK);
  __m256 acc[NG][NV];
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) acc[g][i] = _mm256_loadu_ps(o + size_t(g) * head_dim + d0 + 8 * size_t(i));
  alignas(32) float w[NG][kKvTileRows];
  const __m256 zero = _mm256_setzero_ps();
  for (int t = 0; t < n; t += kKvTileRows) {
    const uint8_t* tile = v + size_t(t) * row_stride;
    prefetch_stream(tile + tile_scale_at(d0 / tensor::kQK, 0));
    for (int half = 0; half < kKvTileRows; half += 8) {
      const __m256 d = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(tile + tile_scale_at(d0 / tensor::kQK, half))));
      for (int g = 0; g < NG; ++g) {
        const __m256 pg = _mm256_loadu_ps(p + size_t(g) * ld + size_t(t + half));
        _mm256_store_ps(w[g] + half, _mm256_and_ps(_mm256_mul_ps(pg, d), _mm256_cmp_ps(pg, zero, _CMP_NEQ_UQ)));
      }
    }
    for (int j = 0; j < kKvTileRows; ++j) {
      const uint8_t* row = tile + v_tile_row_at(head_dim, j) + d0;
      prefetch_stream(row);
      for (int i = 0; i < NV; ++i) {
        const __m256 x = load8_q8(row + 8 * size_t(i));
        for (int g = 0; g < NG; ++g) acc[g][i] = _mm256_fmadd_ps(_mm256_set1_ps(w[g][j]), x, acc[g][i]);
      }
    }
  }
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(o + size_t(g) * head_dim + d0 + 8 * size_t(i), acc[g][i]);
}

template <DType T, int NG, int NV>
void accumulate_pass(const float* p, size_t ld, const uint8_t* v, size_t row_stride, int n, size_t head_dim, size_t d0,
                     float* o) {
  if constexpr (T == DType::Q8_0)
    accumulate_tiles_q8<NG, NV>(p, ld, v, row_stride, n, head_dim, d0, o);
  else
    accumulate_block<T, NG, NV>(p, ld, v, row_stride, n, head_dim, d0, o);
}

// 32 dimensions per pass (16 with 4 heads, or when head_dim is not a
// multiple of 32); a q8_0 block is 32 wide, so a pass never crosses one.
template <DType T, int NG>
void accumulate_heads(const float* p, size_t ld, const uint8_t* v, size_t row_stride, int n, size_t head_dim,
                      float* o) {
  constexpr int kWide = NG <= 3 ? 4 : 2;
  const bool wide = head_dim % (8 * kWide) == 0;
  for (size_t d0 = 0; d0 < head_dim; d0 += wide ? 8 * kWide : 16) {
    if (wide)
      accumulate_pass<T, NG, kWide>(p, ld, v, row_stride, n, head_dim, d0, o);
    else
      accumulate_pass<T, NG, 2>(p, ld, v, row_stride, n, head_dim, d0, o);
  }
}

// The passes spelled out rather than through for_each_tile: with it GCC
// built the q8_0 tiles' loop worse (attend/q8_0/pos:1024/avx2 10.3 -> 13.6 us).
template <DType T>
void accumulate(const float* p, size_t ld, int group, const uint8_t* v, size_t row_stride, int n, size_t head_dim,
                float* o) {
  for (int g0 = 0; g0 < group; g0 += kAttnHeadsPerPass) {
    const float* pg = p + size_t(g0) * ld;
    float* og = o + size_t(g0) * head_dim;
    with_tile_count<kAttnHeadsPerPass>(size_t(group - g0), [&]<int NG>() {
      accumulate_heads<T, NG>(pg, ld, v, row_stride, n, head_dim, og);
    });
  }
}

float max(const float* x, size_t n) {
  size_t i = 0;
  float best = x[0];
  if (n >= 8) {
    __m256 m = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    best = _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
  }
  for (; i < n; ++i) best = std::max(best, x[i]);
  return best;
}

float exp_sum(float* x, size_t n, float m) {
  const __m256 vm = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  if (i < n) {  // the tail through the same formula, padded with m (e^0)
    alignas(32) float tail[8];
    for (size_t t = 0; t < 8; ++t) tail[t] = i + t < n ? x[i + t] : m;
    _mm256_store_ps(tail, exp8(_mm256_sub_ps(_mm256_load_ps(tail), vm)));
    for (size_t t = 0; i + t < n; ++t) sum += (x[i + t] = tail[t]);
  }
  return sum;
}

}  // namespace

// These need head_dim to be a multiple of 16; attn_kernel() offers them
// only then. prepare_q and scores come as a pair (q as f32 values).
AttnKernel find_attn(DType t) {
  AttnKernel k{};
  k.max = max;
  k.exp_sum = exp_sum;
  if (t == DType::F32) {
    k.prepare_q = prepare_q_f32;
    k.scores = scores<DType::F32>;
    k.accumulate = accumulate<DType::F32>;
  } else if (t == DType::F16) {
    k.prepare_q = prepare_q_f16;
    k.scores = scores_f16;
    k.accumulate = accumulate<DType::F16>;
  } else if (t == DType::Q8_0) {
    k.prepare_q = prepare_q_q8_0;
    k.scores = scores_q8_0;
    k.accumulate = accumulate<DType::Q8_0>;
  }
  return k;
}

void rescale_add(float* o, const float* po, float a, float b, size_t n) {
  const __m256 va = _mm256_set1_ps(a), vb = _mm256_set1_ps(b);
  size_t d = 0;
  for (; d + 8 <= n; d += 8)
    _mm256_storeu_ps(o + d, _mm256_add_ps(_mm256_mul_ps(_mm256_loadu_ps(o + d), va),
                                          _mm256_mul_ps(_mm256_loadu_ps(po + d), vb)));
  for (; d < n; ++d) o[d] = o[d] * a + po[d] * b;
}

}  // namespace kvlab::kernels::avx2
