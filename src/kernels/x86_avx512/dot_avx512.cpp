// AVX-512 VNNI kernels (Ice Lake, Sapphire Rapids, Zen 4 and later).
// Compiled with -mavx512f/bw/vl/dq/vnni; only called after
// cpu().best() >= Avx512, which requires VNNI.
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
// halves (see attention_avx512.cpp); the one exception is group_tokens
// (blocks_vnni.h), where they halve the broadcast loads rather than the arithmetic.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/dot.h"
#include "kernels/dot_shapes.h"
#include "kernels/q4_k_rows8.h"
#include "kernels/q6_k_rows8.h"
#include "kernels/tile_count.h"
#include "kernels/x86_avx512/blocks_vnni.h"
#include "tensor/blocks.h"

namespace kvlab::kernels::avx512 {
namespace {
using namespace tensor;
struct Tag {};  // this file's instances of the shared SIMD templates (q4_k_rows8.h)

using namespace vnni;

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
