// Scalar reference dot products: the fallback on CPUs without AVX2 and the
// oracle every SIMD kernel is tested against.
#include <cmath>
#include <cstdint>

#include "kernels/dot.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/half.h"

namespace kvlab::kernels::scalar {
namespace {
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
    s += float(sumi) * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
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
    s += float(sumi) * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d));
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
    s += float(sumi) * (f16_to_f32(x[b].d) * f16_to_f32(y[b].d)) + f16_to_f32(x[b].m) * f16_to_f32(y[b].s);
  }
  return s;
}

const DotKernel kF32{ActFormat::F32, act_f32, dot_f32, dot4_by_rows<dot_f32>, rows4_by_rows<dot_f32>};
const DotKernel kF16{ActFormat::F16, quantize_row_f16, dot_f16, dot4_by_rows<dot_f16>, rows4_by_rows<dot_f16>};
const DotKernel kBF16{ActFormat::BF16, quantize_row_bf16, dot_bf16, dot4_by_rows<dot_bf16>, rows4_by_rows<dot_bf16>};
const DotKernel kQ8_0{ActFormat::Q8_0, quantize_row_q8_0, dot_q8_0, dot4_by_rows<dot_q8_0>, rows4_by_rows<dot_q8_0>};
const DotKernel kQ4_0{ActFormat::Q8_0, quantize_row_q8_0, dot_q4_0, dot4_by_rows<dot_q4_0>, rows4_by_rows<dot_q4_0>};
const DotKernel kQ4_1{ActFormat::Q8_1, quantize_row_q8_1, dot_q4_1, dot4_by_rows<dot_q4_1>, rows4_by_rows<dot_q4_1>};

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

}  // namespace kvlab::kernels::scalar
