// Scalar reference codecs for every block format (see blocks.h for layouts).
// These define the formats: SIMD kernels and the quantize tool are tested
// against them.
#include "tensor/codecs.h"

#include <algorithm>
#include <cmath>

#include "tensor/blocks.h"
#include "tensor/half.h"

namespace kvlab::tensor {

float signed_absmax(const float* x, size_t n) {
  float amax = 0.f, max = 0.f;
  for (size_t j = 0; j < n; ++j)
    if (std::fabs(x[j]) > amax) amax = std::fabs(x[j]), max = x[j];
  return max;
}

namespace {
// An asymmetric block's grid, x = q * d + min with q in 0..levels, from its
// minimum and maximum; id = 1/d (0 for a constant block).
struct MinMaxGrid {
  float d, id, min;
};
MinMaxGrid min_max_grid(const float* x, int levels) {
  const auto [mn, mx] = std::minmax_element(x, x + kQK);
  const float d = (*mx - *mn) / float(levels);
  return {d, d != 0.f ? 1.f / d : 0.f, *mn};
}
}  // namespace

// ---- plain floats ---------------------------------------------------------

void dequantize_row_f32(const void* src, float* dst, size_t n) {
  std::copy_n(static_cast<const float*>(src), n, dst);
}
void quantize_row_f32(const float* src, void* dst, size_t n) {
  std::copy_n(src, n, static_cast<float*>(dst));
}
void dequantize_row_f16(const void* src, float* dst, size_t n) {
  auto* h = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
}
void quantize_row_f16(const float* src, void* dst, size_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
}
void dequantize_row_bf16(const void* src, float* dst, size_t n) {
  auto* h = static_cast<const uint16_t*>(src);
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}
void quantize_row_bf16(const float* src, void* dst, size_t n) {
  auto* h = static_cast<uint16_t*>(dst);
  for (size_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

// ---- Q4_0: symmetric 4-bit, x = (q - 8) * d --------------------------------

void dequantize_row_q4_0(const void* src, float* dst, size_t n) {
  auto* b = static_cast<const BlockQ4_0*>(src);
  for (size_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = float((b[i].qs[j] & 0x0f) - 8) * d;
      dst[j + kQK / 2] = float((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}
// d is chosen from the element of largest magnitude, keeping its sign, so that
// element maps exactly to q = 0 (value -8*d); this uses the asymmetric end of
// the 4-bit range, as GGML's reference quantizer does.
void quantize_row_q4_0(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ4_0*>(dst);
  for (size_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -8.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, int(src[j] * id + 8.5f));
      const int hi = std::min(15, int(src[j + kQK / 2] * id + 8.5f));
      b[i].qs[j] = uint8_t(lo | (hi << 4));
    }
  }
}

// ---- Q4_1: asymmetric 4-bit, x = q * d + m ---------------------------------

void dequantize_row_q4_1(const void* src, float* dst, size_t n) {
  auto* b = static_cast<const BlockQ4_1*>(src);
  for (size_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      dst[j] = float(b[i].qs[j] & 0x0f) * d + m;
      dst[j + kQK / 2] = float(b[i].qs[j] >> 4) * d + m;
    }
  }
}
void quantize_row_q4_1(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ4_1*>(dst);
  for (size_t i = 0; i < n / kQK; ++i, src += kQK) {
    const MinMaxGrid g = min_max_grid(src, 15);
    b[i].d = f32_to_f16(g.d);
    b[i].m = f32_to_f16(g.min);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = std::min(15, int((src[j] - g.min) * g.id + 0.5f));
      const int hi = std::min(15, int((src[j + kQK / 2] - g.min) * g.id + 0.5f));
      b[i].qs[j] = uint8_t(lo | (hi << 4));
    }
  }
}

// ---- Q5_0 / Q5_1: Q4_0 / Q4_1 with a fifth bit per weight from qh ---------

namespace {
inline uint32_t load_qh(const uint8_t qh[4]) {
  return uint32_t(qh[0]) | uint32_t(qh[1]) << 8 | uint32_t(qh[2]) << 16 | uint32_t(qh[3]) << 24;
}
// The 5-bit values of a block: q[j] for j < 16 from the low nibbles, j >= 16
// from the high nibbles, bit 4 from bit j of qh.
inline void unpack_q5(const uint8_t* qs, const uint8_t qh[4], int q[kQK]) {
  const uint32_t h = load_qh(qh);
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = (qs[j] & 0x0f) | int((h >> j) & 1) << 4;
    q[j + kQK / 2] = (qs[j] >> 4) | int((h >> (j + kQK / 2)) & 1) << 4;
  }
}
inline void pack_q5(const int q[kQK], uint8_t* qs, uint8_t qh[4]) {
  uint32_t h = 0;
  for (int j = 0; j < kQK / 2; ++j) {
    qs[j] = uint8_t((q[j] & 0x0f) | (q[j + kQK / 2] & 0x0f) << 4);
    h |= uint32_t(q[j] >> 4) << j | uint32_t(q[j + kQK / 2] >> 4) << (j + kQK / 2);
  }
  for (int i = 0; i < 4; ++i) qh[i] = uint8_t(h >> (8 * i));
}
}  // namespace

void dequantize_row_q5_0(const void* src, float* dst, size_t n) {
  auto* b = static_cast<const BlockQ5_0*>(src);
  int q[kQK];
  for (size_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d);
    unpack_q5(b[i].qs, b[i].qh, q);
    for (int j = 0; j < kQK; ++j) dst[j] = float(q[j] - 16) * d;
  }
}
// As Q4_0: the largest-magnitude element, with its sign, maps to q = 0.
void quantize_row_q5_0(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ5_0*>(dst);
  int q[kQK];
  for (size_t i = 0; i < n / kQK; ++i, src += kQK) {
    const float d = signed_absmax(src, kQK) / -16.f;
    const float id = d != 0.f ? 1.f / d : 0.f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, int(src[j] * id + 16.5f));
    pack_q5(q, b[i].qs, b[i].qh);
  }
}

void dequantize_row_q5_1(const void* src, float* dst, size_t n) {
  auto* b = static_cast<const BlockQ5_1*>(src);
  int q[kQK];
  for (size_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d), m = f16_to_f32(b[i].m);
    unpack_q5(b[i].qs, b[i].qh, q);
    for (int j = 0; j < kQK; ++j) dst[j] = float(q[j]) * d + m;
  }
}
void quantize_row_q5_1(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ5_1*>(dst);
  int q[kQK];
  for (size_t i = 0; i < n / kQK; ++i, src += kQK) {
    const MinMaxGrid g = min_max_grid(src, 31);
    b[i].d = f32_to_f16(g.d);
    b[i].m = f32_to_f16(g.min);
    for (int j = 0; j < kQK; ++j) q[j] = std::min(31, int((src[j] - g.min) * g.id + 0.5f));
    pack_q5(q, b[i].qs, b[i].qh);
  }
}

// ---- Q8_0: symmetric 8-bit, x = q * d --------------------------------------

void dequantize_row_q8_0(const void* src, float* dst, size_t n) {
  auto* b = static_cast<const BlockQ8_0*>(src);
  for (size_t i = 0; i < n / kQK; ++i, dst += kQK) {
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < kQK; ++j) dst[j] = float(b[i].qs[j]) * d;
  }
}
void quantize_row_q8_0(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ8_0*>(dst);
  for (size_t i = 0; i < n / kQK; ++i, src += kQK) {
    float amax = 0.f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    b[i].d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = int8_t(std::nearbyint(src[j] * id));
  }
}

void quantize_row_q8_1(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ8_1*>(dst);
  for (size_t i = 0; i < n / kQK; ++i, src += kQK) {
    float amax = 0.f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(src[j]));
    const float d = amax / 127.f;
    const float id = amax != 0.f ? 127.f / amax : 0.f;
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b[i].qs[j] = int8_t(std::nearbyint(src[j] * id));
      sum += b[i].qs[j];
    }
    b[i].d = f32_to_f16(d);
    b[i].s = f32_to_f16(float(sum) * d);
  }
}

}  // namespace kvlab::tensor
