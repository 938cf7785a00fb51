// Quantized block layouts, bit-compatible with GGML's (the GGUF tensor data).
// The legacy formats cover 32 consecutive weights of one row with fp16 d (and
// m); the K-quants cover 256 ("super-blocks") with sub-block scales.
#pragma once
#include <cstdint>

namespace kvlab::tensor {

inline constexpr int kQK = 32;    // weights per block for Q4_0, Q4_1, Q5_0, Q5_1, Q8_0
inline constexpr int kQK_K = 256;  // weights per super-block for Q4_K, Q5_K, Q6_K, Q8_K

// Q4_0: x[i] = (q[i] - 8) * d
//   qs[j] low nibble  -> q[j]       (j = 0..15)
//   qs[j] high nibble -> q[j + 16]
//   byte:  [ hi: q[j+16] | lo: q[j] ]
struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_0) == 18);

// Q4_1: x[i] = q[i] * d + m, same nibble layout as Q4_0, q in 0..15.
struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ4_1) == 20);

// Q5_0: x[i] = (q[i] - 16) * d, q in 0..31: the low 4 bits in the Q4_0 nibble
// layout, bit 4 of q[i] is bit i of qh (little-endian 32-bit word).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_0) == 22);

// Q5_1: x[i] = q[i] * d + m, bits as in Q5_0.
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ5_1) == 24);

// Q8_0: x[i] = q[i] * d, q in -127..127.
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_0) == 34);

// Q8_1: Q8_0 plus s = d * sum(q), precomputed so a Q4_1 dot product can add
// the weight block's offset m in one multiply: sum((q_w*d_w + m) * x) =
// d_w*d_x*sum(q_w*q_x) + m*s. Used only for activations.
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK];
};
static_assert(sizeof(BlockQ8_1) == 36);

// ---- K-quants: 256 weights in 8 sub-blocks of 32 (Q4_K, Q5_K) or 16 of 16
// (Q6_K), each with its own scale quantized against the super-block's fp16 d.

// The 12 scale bytes of Q4_K / Q5_K hold 8 six-bit scales and 8 six-bit
// minimums: for sub-block j < 4, scale = b[j] & 63 and min = b[j+4] & 63; for
// j >= 4, the low 4 bits come from b[j+4] (scale: low nibble, min: high
// nibble) and the top 2 bits from the spare bits 6-7 of b[j-4] (scale) and
// b[j] (min).
inline constexpr int kKScaleBytes = 12;

struct ScaleMin {
  uint8_t scale, min;
};
inline ScaleMin kquant_scale_min(const uint8_t* b, int j) {
  if (j < 4) return {uint8_t(b[j] & 63), uint8_t(b[j + 4] & 63)};
  return {uint8_t((b[j + 4] & 0x0f) | (b[j - 4] >> 6) << 4), uint8_t((b[j + 4] >> 4) | (b[j] >> 6) << 4)};
}

// Q4_K: x = d*sc[j]*q - dmin*m[j] for sub-block j, q in 0..15. The quants of
// each 64 weights (sub-blocks 2c, 2c+1) share 32 bytes qs[32c..32c+31]:
// sub-block 2c in the low nibbles, 2c+1 in the high nibbles.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144);

// Q5_K: Q4_K plus a fifth bit: bit 4 of weight 64c+l (l < 32) is bit 2c of
// qh[l]; of weight 64c+32+l, bit 2c+1.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176);

// Q6_K: x = d * scales[i] * (q - 32) for 16-weight sub-block i, q in 0..63.
// Each 128 weights (half h) use ql[64h..64h+63] and qh[32h..32h+31]; for
// l < 32 the four weights 128h + l + {0, 32, 64, 96} take, in order, the low
// nibbles of ql[l], ql[l+32], then their high nibbles, and bits {0-1, 2-3,
// 4-5, 6-7} of qh[l] as bits 4-5.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];
  uint8_t qh[kQK_K / 4];
  int8_t scales[kQK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210);

// Q8_K: activations for the K-quant dot products: x = d * q with an f32 d,
// plus the sum of each 16 quants (bsums) for the minimum and offset terms.
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292);

}  // namespace kvlab::tensor
