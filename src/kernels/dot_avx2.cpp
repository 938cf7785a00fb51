// AVX2 + FMA + F16C dot products (Haswell / Zen 1 and later). Compiled with
// -mavx2 -mfma -mf16c; only called after cpu().best() >= Avx2.
//
// Quantized blocks use the unsigned x signed byte multiply (vpmaddubsw), which
// sums adjacent pairs into int16 without overflow here (|q_w| <= 15 or we move
// the sign onto the activation, |q_x| <= 127, 2*127*127 < 32767), then
// vpmaddwd with ones to widen to int32 lanes.
#include <immintrin.h>

#include <cstdint>

#include "kernels/dot.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/half.h"

namespace kvlab::kernels::avx2 {
namespace {
using namespace tensor;

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

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

float dot_f32(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const float*>(w);
  auto* y = static_cast<const float*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc0);
  float s = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += x[i] * y[i];
  return s;
}

float dot_f16(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const uint16_t*>(w);
  auto* y = static_cast<const uint16_t*>(a);
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256 vy = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(y + i)));
    acc = _mm256_fmadd_ps(vx, vy, acc);
  }
  float s = hsum(acc);
  for (; i < n; ++i) s += h2f(x[i]) * h2f(y[i]);
  return s;
}

inline __m256 load_bf16(const uint16_t* p) {
  const __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
}
float dot_bf16(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const uint16_t*>(w);
  auto* y = static_cast<const uint16_t*>(a);
  __m256 acc = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(load_bf16(x + i), load_bf16(y + i), acc);
  float s = hsum(acc);
  for (; i < n; ++i) s += bf16_to_f32(x[i]) * bf16_to_f32(y[i]);
  return s;
}

float dot_q8_0(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ8_0*>(w);
  auto* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  for (size_t b = 0; b < n / kQK; ++b) {
    const __m256i qx = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[b].d) * h2f(y[b].d));
    acc = _mm256_fmadd_ps(d, dot_i8_i8(qx, qy), acc);
  }
  return hsum(acc);
}

float dot_q4_0(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ4_0*>(w);
  auto* y = static_cast<const BlockQ8_0*>(a);
  __m256 acc = _mm256_setzero_ps();
  const __m256i eight = _mm256_set1_epi8(8);
  for (size_t b = 0; b < n / kQK; ++b) {
    const __m256i qx = _mm256_sub_epi8(unpack_nibbles(x[b].qs), eight);
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[b].d) * h2f(y[b].d));
    acc = _mm256_fmadd_ps(d, dot_i8_i8(qx, qy), acc);
  }
  return hsum(acc);
}

float dot_q4_1(const void* w, const void* a, size_t n) {
  auto* x = static_cast<const BlockQ4_1*>(w);
  auto* y = static_cast<const BlockQ8_1*>(a);
  __m256 acc = _mm256_setzero_ps();
  float offsets = 0.f;  // sum of m_w * s_x
  for (size_t b = 0; b < n / kQK; ++b) {
    const __m256i qx = unpack_nibbles(x[b].qs);
    const __m256i qy = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
    const __m256 d = _mm256_set1_ps(h2f(x[b].d) * h2f(y[b].d));
    acc = _mm256_fmadd_ps(d, dot_u8_i8(qx, qy), acc);
    offsets += h2f(x[b].m) * h2f(y[b].s);
  }
  return hsum(acc) + offsets;
}

const DotKernel kF32{ActFormat::F32, quantize_row_f32, dot_f32};
const DotKernel kF16{ActFormat::F16, quantize_row_f16, dot_f16};
const DotKernel kBF16{ActFormat::BF16, quantize_row_bf16, dot_bf16};
const DotKernel kQ8_0{ActFormat::Q8_0, quantize_row_q8_0, dot_q8_0};
const DotKernel kQ4_0{ActFormat::Q8_0, quantize_row_q8_0, dot_q4_0};
const DotKernel kQ4_1{ActFormat::Q8_1, quantize_row_q8_1, dot_q4_1};

}  // namespace

const DotKernel* find(DType w) {
  switch (w) {
    case DType::F32: return &kF32;
    case DType::F16: return &kF16;
    case DType::BF16: return &kBF16;
    case DType::Q8_0: return &kQ8_0;
    case DType::Q4_0: return &kQ4_0;
    case DType::Q4_1: return &kQ4_1;
  }
  return nullptr;
}

}  // namespace kvlab::kernels::avx2
