// AVX2/F16C value accumulation for attention (see attention.h).
#include <immintrin.h>

#include "kernels/attention.h"
#include "tensor/blocks.h"

namespace kvlab::kernels::avx2 {
namespace {
void axpy_f32(float a, const void* row, float* y, size_t n) {
  auto* x = static_cast<const float*>(row);
  const __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += a * x[i];
}
void axpy_f16(float a, const void* row, float* y, size_t n) {
  auto* x = static_cast<const uint16_t*>(row);
  const __m256 va = _mm256_set1_ps(a);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 vx = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, vx, _mm256_loadu_ps(y + i)));
  }
  for (; i < n; ++i) y[i] += a * _cvtsh_ss(x[i]);
}
// One q8_0 block: 32 int8 widened to float in 4 groups of 8, scaled by a*d.
void axpy_q8_0(float a, const void* row, float* y, size_t n) {
  auto* b = static_cast<const tensor::BlockQ8_0*>(row);
  for (size_t i = 0; i < n / tensor::kQK; ++i, y += tensor::kQK) {
    const __m256 ad = _mm256_set1_ps(a * _cvtsh_ss(b[i].d));
    for (int k = 0; k < 4; ++k) {
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b[i].qs + 8 * k));
      const __m256 v = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
      _mm256_storeu_ps(y + 8 * k, _mm256_fmadd_ps(ad, v, _mm256_loadu_ps(y + 8 * k)));
    }
  }
}
}  // namespace
AxpyFn find_axpy(tensor::DType t) {
  if (t == tensor::DType::F32) return axpy_f32;
  if (t == tensor::DType::F16) return axpy_f16;
  if (t == tensor::DType::Q8_0) return axpy_q8_0;
  return nullptr;
}
}  // namespace kvlab::kernels::avx2
