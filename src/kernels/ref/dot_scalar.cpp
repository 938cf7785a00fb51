// Scalar reference dot products: the fallback on CPUs without AVX2 and the
// oracle every SIMD kernel is tested against.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/dot.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/half.h"

namespace kvlab::kernels::scalar {
namespace {
// The 32-element block formats add each block's term with fused
// multiply-adds (std::fma, one rounding): the operations the rows-of-8 SIMD
// kernels do lane by lane, so they equal this reference bit for bit. Fused,
// those kernels spend one or two fewer operations per block and token than
// with a separate multiply and add (q4_1 matmul 1536x576, 1 thread, best of
// 30 alternating runs: 64 tokens 870 -> 813 us; 1 token, bandwidth-bound,
// 18.5 -> 18.0 us).
using namespace tensor;

void act_f32(const float* x, void* out, size_t n) { quantize_row_f32(x, out, n); }

float dot_f32(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const float*>(w);
  auto* y = static_cast<const float*>(a);
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) s += x[i] * y[i];
  return s;
}
float dot_f16(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const uint16_t*>(w);
  auto* y = static_cast<const uint16_t*>(a);
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) s += f16_to_f32(x[i]) * f16_to_f32(y[i]);
  return s;
}
float dot_bf16(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const uint16_t*>(w);
  auto* y = static_cast<const uint16_t*>(a);
  float s = 0.f;
  for (size_t i = 0; i < n; ++i) s += bf16_to_f32(x[i]) * bf16_to_f32(y[i]);
  return s;
}

float dot_q8_0(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ8_0*>(w);
  auto* y = static_cast<const BlockQ8_0*>(a);
  float s = 0.f;
  for (size_t b = 0; b < n / kQK; ++b) {
    int sumi = 0;
    for (int j = 0; j < kQK; ++j) sumi += int(x[b].qs[j]) * int(y[b].qs[j]);
    s = std::fma(float(sumi), f16_to_f32(x[b].d) * f16_to_f32(y[b].d), s);
  }
  return s;
}
float dot_q4_0(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ4_0*>(w);
  auto* y = static_cast<const BlockQ8_0*>(a);
  float s = 0.f;
  for (size_t b = 0; b < n / kQK; ++b) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((x[b].qs[j] & 0x0f) - 8) * int(y[b].qs[j]);
      sumi += ((x[b].qs[j] >> 4) - 8) * int(y[b].qs[j + kQK / 2]);
    }
    s = std::fma(float(sumi), f16_to_f32(x[b].d) * f16_to_f32(y[b].d), s);
  }
  return s;
}
float dot_q4_1(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ4_1*>(w);
  auto* y = static_cast<const BlockQ8_1*>(a);
  float s = 0.f;
  for (size_t b = 0; b < n / kQK; ++b) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += (x[b].qs[j] & 0x0f) * int(y[b].qs[j]);
      sumi += (x[b].qs[j] >> 4) * int(y[b].qs[j + kQK / 2]);
    }
    s = std::fma(float(sumi), f16_to_f32(x[b].d) * f16_to_f32(y[b].d), std::fma(f16_to_f32(x[b].m), f16_to_f32(y[b].s), s));
  }
  return s;
}

// Bit 4 of a Q5 block's weight j (bit j of the little-endian qh word).
inline int q5_high(const uint8_t qh[4], int j) { return (qh[j / 8] >> (j % 8) & 1) << 4; }

float dot_q5_0(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ5_0*>(w);
  auto* y = static_cast<const BlockQ8_0*>(a);
  float s = 0.f;
  for (size_t b = 0; b < n / kQK; ++b) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += (((x[b].qs[j] & 0x0f) | q5_high(x[b].qh, j)) - 16) * int(y[b].qs[j]);
      sumi += (((x[b].qs[j] >> 4) | q5_high(x[b].qh, j + kQK / 2)) - 16) * int(y[b].qs[j + kQK / 2]);
    }
    s = std::fma(float(sumi), f16_to_f32(x[b].d) * f16_to_f32(y[b].d), s);
  }
  return s;
}
float dot_q5_1(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ5_1*>(w);
  auto* y = static_cast<const BlockQ8_1*>(a);
  float s = 0.f;
  for (size_t b = 0; b < n / kQK; ++b) {
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      sumi += ((x[b].qs[j] & 0x0f) | q5_high(x[b].qh, j)) * int(y[b].qs[j]);
      sumi += ((x[b].qs[j] >> 4) | q5_high(x[b].qh, j + kQK / 2)) * int(y[b].qs[j + kQK / 2]);
    }
    s = std::fma(float(sumi), f16_to_f32(x[b].d) * f16_to_f32(y[b].d), std::fma(f16_to_f32(x[b].m), f16_to_f32(y[b].s), s));
  }
  return s;
}

// K-quants: exact integer sums per super-block, then its float terms.
// Dequantizing one super-block into ints keeps this readable; it is the
// oracle, not the fast path (dot_kquants_avx2.cpp).
template <class Block>
float dot_q45_k(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const Block*>(w);
  auto* y = static_cast<const BlockQ8_K*>(a);
  float s = 0.f;
  float q[kQK_K];
  for (size_t b = 0; b < n / kQK_K; ++b) {
    // With d = 1, dmin = 0 the codec yields sc_j * q exactly (small integers).
    Block unit = x[b];
    unit.d = f32_to_f16(1.f);
    unit.dmin = 0;
    if constexpr (std::is_same_v<Block, BlockQ4_K>) dequantize_row_q4_k(&unit, q, kQK_K);
    else dequantize_row_q5_k(&unit, q, kQK_K);
    int sumi = 0, summ = 0;
    for (int l = 0; l < kQK_K; ++l) sumi += int(q[l]) * int(y[b].qs[l]);
    for (int j = 0; j < kQK_K / 32; ++j)
      summ += int(kquant_scale_min(x[b].scales, j).min) * (y[b].bsums[2 * j] + y[b].bsums[2 * j + 1]);
    s += (f16_to_f32(x[b].d) * y[b].d) * float(sumi) - (f16_to_f32(x[b].dmin) * y[b].d) * float(summ);
  }
  return s;
}
float dot_q6_k(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ6_K*>(w);
  auto* y = static_cast<const BlockQ8_K*>(a);
  float s = 0.f;
  float q[kQK_K];
  for (size_t b = 0; b < n / kQK_K; ++b) {
    BlockQ6_K unit = x[b];
    unit.d = f32_to_f16(1.f);
    dequantize_row_q6_k(&unit, q, kQK_K);  // sc_i * (q - 32), exact
    int sumi = 0;
    for (int l = 0; l < kQK_K; ++l) sumi += int(q[l]) * int(y[b].qs[l]);
    s += (f16_to_f32(x[b].d) * y[b].d) * float(sumi);
  }
  return s;
}

const DotKernel kF32{ActFormat::F32, act_f32, dot_f32, dot4_by_rows<dot_f32>, rows4_by_rows<dot_f32>};
const DotKernel kF16{ActFormat::F16, quantize_row_f16, dot_f16, dot4_by_rows<dot_f16>, rows4_by_rows<dot_f16>};
const DotKernel kBF16{ActFormat::BF16, quantize_row_bf16, dot_bf16, dot4_by_rows<dot_bf16>, rows4_by_rows<dot_bf16>};
const DotKernel kQ8_0{ActFormat::Q8_0, quantize_row_q8_0, dot_q8_0, dot4_by_rows<dot_q8_0>, rows4_by_rows<dot_q8_0>};
const DotKernel kQ4_0{ActFormat::Q8_0, quantize_row_q8_0, dot_q4_0, dot4_by_rows<dot_q4_0>, rows4_by_rows<dot_q4_0>};
const DotKernel kQ4_1{ActFormat::Q8_1, quantize_row_q8_1, dot_q4_1, dot4_by_rows<dot_q4_1>, rows4_by_rows<dot_q4_1>};
const DotKernel kQ5_0{ActFormat::Q8_0, quantize_row_q8_0, dot_q5_0, dot4_by_rows<dot_q5_0>, rows4_by_rows<dot_q5_0>};
const DotKernel kQ5_1{ActFormat::Q8_1, quantize_row_q8_1, dot_q5_1, dot4_by_rows<dot_q5_1>, rows4_by_rows<dot_q5_1>};
constexpr auto dot_q4_k = dot_q45_k<BlockQ4_K>;
constexpr auto dot_q5_k = dot_q45_k<BlockQ5_K>;
const DotKernel kQ4_K{ActFormat::Q8_K, quantize_row_q8_k, dot_q4_k, dot4_by_rows<dot_q4_k>, rows4_by_rows<dot_q4_k>};
const DotKernel kQ5_K{ActFormat::Q8_K, quantize_row_q8_k, dot_q5_k, dot4_by_rows<dot_q5_k>, rows4_by_rows<dot_q5_k>};
const DotKernel kQ6_K{ActFormat::Q8_K, quantize_row_q8_k, dot_q6_k, dot4_by_rows<dot_q6_k>, rows4_by_rows<dot_q6_k>};

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
    case DType::Q4_K: return &kQ4_K;
    case DType::Q5_K: return &kQ5_K;
    case DType::Q6_K: return &kQ6_K;
  }
  return nullptr;
}

}  // namespace kvlab::kernels::scalar
