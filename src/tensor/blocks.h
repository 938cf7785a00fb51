// Quantized block layouts, bit-compatible with GGML's (the GGUF tensor data).
// Each block covers 32 consecutive weights of one row; d and m are fp16.
#pragma once
#include <cstdint>

namespace kvlab::tensor {

inline constexpr int kQK = 32;  // weights per block for Q4_0, Q4_1, Q8_0

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

}  // namespace kvlab::tensor
