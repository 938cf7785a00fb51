// AVX2/F16C value accumulation for attention (see attention.h).
#include <immintrin.h>

#include "kernels/attention.h"

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
}  // namespace
AxpyFn find_axpy(tensor::DType t) {
  if (t == tensor::DType::F32) return axpy_f32;
  if (t == tensor::DType::F16) return axpy_f16;
  return nullptr;
}
}  // namespace kvlab::kernels::avx2
