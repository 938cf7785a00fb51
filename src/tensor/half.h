// IEEE 754 binary16 and bfloat16 <-> float, portable scalar versions. These
// are the reference; SIMD kernels use F16C where the CPU has it.
#pragma once
#include <bit>
#include <cstdint>
#include <cstring>

namespace kvlab::tensor {

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0x1f) {                      // inf / nan
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {                  // normal: rebias 15 -> 127
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {                 // signed zero
    bits = sign;
  } else {                                // subnormal: normalise
    int e = -1;
    do { mant <<= 1; ++e; } while ((mant & 0x400) == 0);
    bits = sign | uint32_t(112 - e) << 23 | ((mant & 0x3ff) << 13);
  }
  return std::bit_cast<float>(bits);
}

// Round to nearest even, with overflow to inf and gradual underflow.
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u)  // inf or nan (keep nan quiet)
    return sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 : 0);
  if (absx >= 0x477ff000u) return sign | 0x7c00;  // rounds to >= 65520: inf
  if (absx < 0x38800000u) {                       // below f16 normal range
    if (absx < 0x33000000u) return sign;          // < half the smallest subnormal
    const uint32_t mant = (absx & 0x7fffff) | 0x800000;
    const int shift = 126 - int(absx >> 23);      // 14..24
    uint32_t v = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (v & 1))) ++v;
    return sign | uint16_t(v);
  }
  uint32_t v = absx - 0x38000000u;                // rebias 127 -> 15 (exp - 112)
  const uint32_t rem = v & 0x1fff;
  v >>= 13;
  if (rem > 0x1000 || (rem == 0x1000 && (v & 1))) ++v;  // may carry into exponent: correct
  return sign | uint16_t(v);
}

inline float bf16_to_f32(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40);  // quiet nan
  x += 0x7fff + ((x >> 16) & 1);  // round to nearest even
  return uint16_t(x >> 16);
}

}  // namespace kvlab::tensor
