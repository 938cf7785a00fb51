// AVX2/FMA versions of the element-wise ops that the compiler cannot
// vectorise from ops.cpp (std::exp is a library call per element).
#include <immintrin.h>

#include "kernels/exp_avx2.h"
#include "kernels/ops.h"

namespace kvlab::kernels::avx2 {
namespace {

// silu(g) * u = g / (1 + e^-g) * u on 8 lanes. For g below -88, e^-g stops at
// e^88 and the result is g / e^88 * u, about 1e-36 * g * u instead of a
// smaller value: both are zero next to the other activations.
__m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

}  // namespace

void silu_mul(float* gate, const float* up, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(gate + i, silu_mul8(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {  // the last 1-7 through the same formula, padded with zeros
    alignas(32) float g[8] = {}, u[8] = {};
    for (size_t t = 0; i + t < n; ++t) {
      g[t] = gate[i + t];
      u[t] = up[i + t];
    }
    _mm256_store_ps(g, silu_mul8(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (size_t t = 0; i + t < n; ++t) gate[i + t] = g[t];
  }
}

}  // namespace kvlab::kernels::avx2
