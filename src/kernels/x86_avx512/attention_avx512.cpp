// AVX-512 attention pieces (see attention.h). For a q8_0 KV cache (VNNI):
// the scores of K's position-minor tiles as integer dot products in
// vpdpbusd, 16 positions per instruction, and the P·V sums over V's tiles as
// int16 dot products in vpdpwssd, two positions per instruction, 64
// dimensions of a head at once. For an f16 cache: the scores of K's tiles,
// 16 positions per multiply-add, and P·V over whole rows. The softmax's
// max and exponentials 16 at a time. The f32 pieces are the AVX2 set's.
//
// Why: a decode step at a long position streams the KV cache from DRAM, and
// with the AVX2 pieces a q8_0 cache, half the bytes of f16, took nearly as
// long, since its kernels did more work per byte than the memory needed
// (bench/micro_attention.cpp, attend_batch).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/attention.h"
#include "kernels/attention_rows.h"
#include "kernels/dot.h"
#include "kernels/exp_poly.h"
#include "kernels/kv_tiles.h"
#include "kernels/tile_count.h"
#include "kernels/x86_avx2/hsum_avx2.h"
#include "tensor/blocks.h"
#include "tensor/half.h"

namespace kvlab::kernels::avx512 {
namespace {

using tensor::BlockQ8_0;
using tensor::DType;
using tensor::kQK;

// ---- q8_0 scores --------------------------------------------------------------
// K comes in tiles of 16 positions (kernels/kv_tiles.h): 4 elements of all 16
// positions are one vector, so one vpdpbusd per head adds 4 dimensions to
// the 16 positions' scores, and the lanes never need a horizontal sum.
// vpdpbusd multiplies unsigned by signed bytes, so each K vector is used as
// k + 128 (k xor 0x80, once for all heads) against q's signed bytes:
// sum((k + 128) * q) = sum(k * q) + 128 * sum(q). The second term depends on
// q alone, so prepare_q stores it, negated, as the accumulator's starting
// value, and each lane ends at exactly sum(k * q) for its position.
struct QBlock {
  int8_t qs[kQK];
  int32_t bias;  // -128 * the sum of qs
  float d;
};
// prepare_q has head_dim floats of room per head: 32 floats per block.
static_assert(sizeof(QBlock) <= kQK * sizeof(float));

void prepare_q_q8_0(const float* q, size_t head_dim, void* out) {
  const DotKernel& quantize = dot_kernel(DType::Q8_0, Isa::Avx2);  // the matmuls' q8_0 activation bytes
  auto* qb = static_cast<QBlock*>(out);
  for (size_t b = 0; b < head_dim / kQK; ++b) {
    BlockQ8_0 blk;
    quantize.quantize_act(q + b * kQK, &blk, kQK);
    std::memcpy(qb[b].qs, blk.qs, kQK);
    int32_t sum = 0;
    for (int8_t x : blk.qs) sum += x;
    qb[b].bias = -128 * sum;
    qb[b].d = tensor::f16_to_f32(blk.d);
  }
}

// Scores of NG heads against one tile. Per 32-element block: its 8 K
// vectors, and per head 8 vpdpbusd in two chains of 4 (one chain of 8 waits
// on the instruction's latency), whose 16 integer sums are scaled by the
// block's 16 K scales times q's.
// The zero-masked conversions with every lane on are the plain ones; those
// start from _mm512_undefined_*, which GCC 12 reports as maybe uninitialized
// (the same goes for the zero-masked min, max and shift below).
template <int NG>
void scores_tile_q8(const uint8_t* q, size_t q_stride, const uint8_t* tile, size_t head_dim, float* s, size_t ld,
                    float scale) {
  __m512 acc[NG];
  for (int g = 0; g < NG; ++g) acc[g] = _mm512_setzero_ps();
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  for (size_t b = 0; b < head_dim / kQK; ++b) {
    __m512i k[kQK / 4];
    for (size_t c = 0; c < kQK / 4; ++c) {
      const uint8_t* line = tile + k_tile_quad_at(head_dim, b * (kQK / 4) + c, 0);
      prefetch_stream(line);
      k[c] = _mm512_xor_si512(_mm512_loadu_si512(line), flip);
    }
    prefetch_stream(tile + tile_scale_at(b, 0));
    const __m512 dk =
        _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + tile_scale_at(b, 0))));
    for (int g = 0; g < NG; ++g) {
      const QBlock& qb = reinterpret_cast<const QBlock*>(q + size_t(g) * q_stride)[b];
      int32_t quad[kQK / 4];
      std::memcpy(quad, qb.qs, kQK);
      __m512i even = _mm512_set1_epi32(qb.bias), odd = _mm512_setzero_si512();
      for (size_t c = 0; c < kQK / 4; c += 2) {
        even = _mm512_dpbusd_epi32(even, k[c], _mm512_set1_epi32(quad[c]));
        odd = _mm512_dpbusd_epi32(odd, k[c + 1], _mm512_set1_epi32(quad[c + 1]));
      }
      const __m512 dot = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_add_epi32(even, odd));
      acc[g] = _mm512_fmadd_ps(dot, _mm512_mul_ps(dk, _mm512_set1_ps(qb.d)), acc[g]);
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  for (int g = 0; g < NG; ++g) _mm512_storeu_ps(s + size_t(g) * ld, _mm512_mul_ps(acc[g], sc));
}

void scores_q8_0(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t*, size_t row_stride, int n,
                 size_t head_dim, float scale, float* s, size_t ld) {
  walk_k_tiles(q, q_stride, group, k, row_stride, n, s, ld, [&]<int NG>(const uint8_t* qg, const uint8_t* tile, float* sg) {
    scores_tile_q8<NG>(qg, q_stride, tile, head_dim, sg, ld, scale);
  });
}

// ---- f16 scores --------------------------------------------------------------
// K comes in tiles of 16 positions (kernels/kv_tiles.h): element d of all 16
// positions is one 32-byte load, widened to 16 floats, times each head's
// q[d] (q rounded to f16 by prepare_q) and added into that head's 16
// scores. Even and odd elements go into two sums per head, so 2 x NG
// multiply-adds are in flight (one chain per head waits on the latency).
// Every lane adds the same elements in the same order, so a score does not
// depend on where its position falls in a tile. Each pair of elements is
// one line of the tile, prefetched ahead as it is read (prefetch_stream).
template <int NG>
void scores_tile_f16(const uint8_t* q, size_t q_stride, const uint8_t* tile, size_t head_dim, float* s, size_t ld,
                     float scale) {
  __m512 acc[NG][2];
  for (int g = 0; g < NG; ++g) acc[g][0] = acc[g][1] = _mm512_setzero_ps();
  // Unrolled: the loop's counter and branch run on ports 0 and 5 as well,
  // which the widening and the multiply-adds fill (attend/f16/pos:1024, two
  // sets of 6 alternating rounds on Emerald Rapids, medians: 10.5 and 10.4 us
  // -> 10.1 and 10.2; P·V's row loop unrolled as well gained nothing more).
#pragma GCC unroll 4
  for (size_t d = 0; d < head_dim; d += 2) {
    prefetch_stream(tile + k_tile_f16_at(d, 0));
    for (size_t h = 0; h < 2; ++h) {
      const __m512 k = _mm512_maskz_cvtph_ps(
          0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + k_tile_f16_at(d + h, 0))));
      for (int g = 0; g < NG; ++g) {
        const float qd = reinterpret_cast<const float*>(q + size_t(g) * q_stride)[d + h];
        acc[g][h] = _mm512_fmadd_ps(k, _mm512_set1_ps(qd), acc[g][h]);
      }
    }
  }
  const __m512 sc = _mm512_set1_ps(scale);
  for (int g = 0; g < NG; ++g) _mm512_storeu_ps(s + size_t(g) * ld, _mm512_mul_ps(_mm512_add_ps(acc[g][0], acc[g][1]), sc));
}

void scores_f16(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t*, size_t row_stride, int n,
                size_t head_dim, float scale, float* s, size_t ld) {
  walk_k_tiles(q, q_stride, group, k, row_stride, n, s, ld, [&]<int NG>(const uint8_t* qg, const uint8_t* tile, float* sg) {
    scores_tile_f16<NG>(qg, q_stride, tile, head_dim, sg, ld, scale);
  });
}

// ---- f16 P·V -------------------------------------------------------------------
// o_g[d0 .. d0+16*NV) += sum_j p_gj v_j[d0 ..) over V rows for NG heads, 64
// dimensions per pass: one pass over a 64-wide head's rows, each row read
// whole and in order, where the AVX2 set's 8-wide vectors take two passes
// of 32 dimensions (half of every row each) and broadcast every p twice.
// Each output element adds the same products (fused multiply-adds) in the
// same order as the AVX2 piece, so the two give the same bits.
template <int NG, int NV>
void accumulate_rows_f16(const float* p, size_t ld, const uint8_t* v, size_t row_stride, int n, size_t head_dim,
                         size_t d0, float* o) {
  __m512 acc[NG][NV];
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_loadu_ps(o + size_t(g) * head_dim + d0 + 16 * size_t(i));
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = v + size_t(j) * row_stride + 2 * d0;
    for (int i = 0; i < NV; i += 2) prefetch_stream(row + 32 * size_t(i));  // a line per two vectors
    __m512 b[NG];
    for (int g = 0; g < NG; ++g) b[g] = _mm512_set1_ps(p[size_t(g) * ld + size_t(j)]);
    for (int i = 0; i < NV; ++i) {
      const __m512 x =
          _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * size_t(i))));
      for (int g = 0; g < NG; ++g) acc[g][i] = _mm512_fmadd_ps(b[g], x, acc[g][i]);
    }
  }
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(o + size_t(g) * head_dim + d0 + 16 * size_t(i), acc[g][i]);
}

void accumulate_f16(const float* p, size_t ld, int group, const uint8_t* v, size_t row_stride, int n, size_t head_dim,
                    float* o) {
  for_each_tile<kAttnHeadsPerPass>(size_t(group), [&]<int NG>(size_t g0) {
    const float* pg = p + g0 * ld;
    float* og = o + g0 * head_dim;
    size_t d0 = 0;
    for (; d0 + 64 <= head_dim; d0 += 64) accumulate_rows_f16<NG, 4>(pg, ld, v, row_stride, n, head_dim, d0, og);
    for (; d0 < head_dim; d0 += 16) accumulate_rows_f16<NG, 1>(pg, ld, v, row_stride, n, head_dim, d0, og);
  });
}

// ---- P·V ------------------------------------------------------------------------
// o_g[d0 .. d0+16*NV) += sum_j w_gj v_j[d0 ..) for NG heads over V tiles
// (kv_tiles.h), w = p times the row's block scale, as integer dot products
// over pairs of positions: vpdpwssd adds w_j v_j + w_j+1 v_j+1 for 16
// dimensions in one instruction, half the multiply-adds of f32 (which ran
// at the FMA units' limit: 12 per position for 3 heads of 64).
// Per tile, head and block, the 16 weights become int16 against the tile's
// largest, u = round(w * 32767 / w_max): a weight is off by at most 2^-16 of
// w_max, finer than an f16 weight (2^-11 relative, llama.cpp's P·V for an
// f16 V). A zero p gives a zero weight whatever the row holds. The integer
// sums stay below 16 * 32767 * 127 < 2^31 and join the f32 accumulators
// once per tile, times w_max / 32767.
// The zero-masked forms with every lane on are the same instructions; the
// plain intrinsics start from _mm512_undefined_*, which GCC 12 reports as
// maybe uninitialized.
//
// 16 dimensions of rows a and b, interleaved (a0 b0 a1 b1 ..) as int16.
inline __m512i pair16(const uint8_t* a, const uint8_t* b) {
  const __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a));
  const __m128i y = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  const __m256i xy = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi8(x, y)), _mm_unpackhi_epi8(x, y), 1);
  return _mm512_maskz_cvtepi8_epi16(~__mmask32(0), xy);
}

// The largest of 16 floats.
inline float max16(__m512 x) {
  __m256 m = _mm256_max_ps(low_half(x), high_half(x));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

template <int NG, int NV>
void accumulate_block(const float* p, size_t ld, const uint8_t* v, size_t row_stride, int n, size_t head_dim, size_t d0,
                      float* o) {
  constexpr int kBlocks = (NV + 1) / 2;  // block scales per pass: 2 vectors per block
  __m512 acc[NG][NV];
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) acc[g][i] = _mm512_loadu_ps(o + size_t(g) * head_dim + d0 + 16 * size_t(i));
  alignas(64) int16_t u[NG][kBlocks][kKvTileRows];
  float unit[NG][kBlocks];
  for (int t = 0; t < n; t += kKvTileRows) {
    const uint8_t* tile = v + size_t(t) * row_stride;
    prefetch_stream(tile + tile_scale_at(d0 / kQK, 0));
    for (int c = 0; c < kBlocks; ++c) {
      const __m512 d = _mm512_maskz_cvtph_ps(
          0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(tile + tile_scale_at(d0 / kQK + size_t(c), 0))));
      for (int g = 0; g < NG; ++g) {
        const __m512 pg = _mm512_loadu_ps(p + size_t(g) * ld + size_t(t));
        const __m512 w = _mm512_maskz_mul_ps(_mm512_cmp_ps_mask(pg, _mm512_setzero_ps(), _CMP_NEQ_UQ), pg, d);
        const float w_max = max16(w);  // >= 0: p >= 0 and a q8_0 scale is amax / 127
        const float to_int = w_max > 0.f ? 32767.f / w_max : 0.f;
        const __m512i q = _mm512_maskz_cvtps_epi32(0xffff, _mm512_mul_ps(w, _mm512_set1_ps(to_int)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(u[g][c]), _mm512_maskz_cvtsepi32_epi16(0xffff, q));
        unit[g][c] = w_max / 32767.f;
      }
    }
    __m512i sum[NG][NV];
    for (int g = 0; g < NG; ++g)
      for (int i = 0; i < NV; ++i) sum[g][i] = _mm512_setzero_si512();
    for (int j = 0; j < kKvTileRows; j += 2) {
      const uint8_t* r0 = tile + v_tile_row_at(head_dim, j) + d0;
      const uint8_t* r1 = r0 + head_dim;
      prefetch_stream(r0);
      prefetch_stream(r1);
      for (int i = 0; i < NV; ++i) {
        const __m512i x = pair16(r0 + 16 * size_t(i), r1 + 16 * size_t(i));
        for (int g = 0; g < NG; ++g) {
          int32_t uu;
          std::memcpy(&uu, &u[g][i / 2][j], 4);
          sum[g][i] = _mm512_dpwssd_epi32(sum[g][i], x, _mm512_set1_epi32(uu));
        }
      }
    }
    for (int g = 0; g < NG; ++g)
      for (int i = 0; i < NV; ++i)
        acc[g][i] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, sum[g][i]), _mm512_set1_ps(unit[g][i / 2]), acc[g][i]);
  }
  for (int g = 0; g < NG; ++g)
    for (int i = 0; i < NV; ++i) _mm512_storeu_ps(o + size_t(g) * head_dim + d0 + 16 * size_t(i), acc[g][i]);
}

// 64 dimensions per pass (4 vectors; 2 with 4 heads), then 32 (head_dim is
// a multiple of 32 in a q8_0 cache).
template <int NG>
void accumulate_heads(const float* p, size_t ld, const uint8_t* v, size_t row_stride, int n, size_t head_dim,
                      float* o) {
  constexpr int kWide = NG <= 3 ? 4 : 2;
  size_t d0 = 0;
  for (; d0 + 16 * kWide <= head_dim; d0 += 16 * kWide)
    accumulate_block<NG, kWide>(p, ld, v, row_stride, n, head_dim, d0, o);
  for (; d0 < head_dim; d0 += 32) accumulate_block<NG, 2>(p, ld, v, row_stride, n, head_dim, d0, o);
}

void accumulate_q8_0(const float* p, size_t ld, int group, const uint8_t* v, size_t row_stride, int n,
                     size_t head_dim, float* o) {
  for_each_tile<kAttnHeadsPerPass>(size_t(group), [&]<int NG>(size_t g0) {
    accumulate_heads<NG>(p + g0 * ld, ld, v, row_stride, n, head_dim, o + g0 * head_dim);
  });
}

// ---- softmax -------------------------------------------------------------------
// The AVX2 set's pieces on 16 lanes, because the exponentials were a fifth
// of a decode step's attention over a q8_0 cache in the L2 (perf record -e
// cpu-clock on attend_batch). The same e^x (kernels/exp_poly.h) and the sums
// in the AVX2 set's 8-lane order, so both give the same bits
// (tests/unit/attention_test.cpp). The zero-masked forms with every lane on
// are the plain operations (see above).
struct Avx512Lanes {
  using F = __m512;
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F min(F a, F b) { return _mm512_maskz_min_ps(0xffff, a, b); }
  static F max(F a, F b) { return _mm512_maskz_max_ps(0xffff, a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F fnmadd(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }
  static F round(F x) { return _mm512_maskz_roundscale_ps(0xffff, x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  // One instruction where the exponent field by hand takes four (a
  // conversion, an add, a shift and a multiply), on the ports the
  // exponentials share with the rest of attention; the same bits, and
  // about 1-2% faster (kvlab_microbench attend/f16/pos:1024 and
  // attend_batch/f16/pos:2048/layers:30/threads:2 measure it).
  static F times_pow2(F e, F n) { return _mm512_maskz_scalef_ps(0xffff, e, n); }
};

float max(const float* x, size_t n) {
  if (n < 16) return max16(_mm512_mask_loadu_ps(_mm512_set1_ps(x[0]), __mmask16((1u << n) - 1), x));
  __m512 m = _mm512_loadu_ps(x);
  size_t i = 16;
  for (; i + 16 <= n; i += 16) m = _mm512_maskz_max_ps(0xffff, m, _mm512_loadu_ps(x + i));
  if (i < n) m = _mm512_maskz_max_ps(0xffff, m, _mm512_loadu_ps(x + n - 16));  // the last 16, some seen already
  return max16(m);
}

// x_i = e^(x_i - m), 16 at a time; the sum adds each vector's low 8 and then
// its high 8 into 8 lanes, as the AVX2 set adds them 8 at a time. The last
// under 16 are padded with m (e^0): a whole 8 among them joins the lanes,
// the rest is added one by one after the lanes' sum, as in the AVX2 set.
float exp_sum(float* x, size_t n, float m) {
  const __m512 vm = _mm512_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp_poly<Avx512Lanes>(_mm512_sub_ps(_mm512_loadu_ps(x + i), vm));
    _mm512_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, low_half(e));
    acc = _mm256_add_ps(acc, high_half(e));
  }
  if (i == n) return hsum(acc);
  const __mmask16 live = __mmask16((1u << (n - i)) - 1);
  const __m512 e = exp_poly<Avx512Lanes>(_mm512_sub_ps(_mm512_mask_loadu_ps(vm, live, x + i), vm));
  _mm512_mask_storeu_ps(x + i, live, e);
  size_t t = 0;
  if (n - i >= 8) {
    acc = _mm256_add_ps(acc, low_half(e));
    t = 8;
  }
  float sum = hsum(acc);
  for (; i + t < n; ++t) sum += x[i + t];
  return sum;
}

}  // namespace

// head_dim a multiple of 16 (attn_kernel() offers SIMD pieces only then; a
// q8_0 cache has whole 32-blocks per head).
AttnKernel find_attn(DType t) {
  AttnKernel k = avx2::find_attn(t);
  k.max = max;
  k.exp_sum = exp_sum;
  if (t == DType::F16) {
    k.scores = scores_f16;
    k.accumulate = accumulate_f16;
  }
  if (t == DType::Q8_0) {
    k.prepare_q = prepare_q_q8_0;
    k.scores = scores_q8_0;
    k.accumulate = accumulate_q8_0;
  }
  return k;
}

}  // namespace kvlab::kernels::avx512
