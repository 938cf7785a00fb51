// AVX2/FMA versions of the element-wise ops that the compiler cannot
// vectorise from ops.cpp (std::exp is a library call per element).
#include <immintrin.h>

#include <cmath>

#include "kernels/ops.h"
#include "kernels/x86_avx2/exp_avx2.h"

namespace kvlab::kernels::avx2 {
namespace {

// silu(g) * u = g / (1 + e^-g) * u on 8 lanes. For g below -88, e^-g stops at
// e^88 and the result is g / e^88 * u, about 1e-36 * g * u instead of a
// smaller value: both are zero next to the other activations.
__m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// gelu_tanh(g) * u. 0.5·(1 + tanh(z)) = 1 / (1 + e^-2z), so gelu_tanh(g) =
// g / (1 + e^-2z) with 2z = g·(2√(2/π) + 2·0.044715·√(2/π)·g²): silu's form
// (and its clamped e^x) at 2z instead of g.
__m256 gelu_mul8(__m256 g, __m256 u) {
  constexpr float kTwoSqrt2OverPi = 1.5957691216f, kTwoCubic = 0.0713548162f;  // 2·0.044715·√(2/π)
  const __m256 two_z = _mm256_mul_ps(g, _mm256_fmadd_ps(_mm256_mul_ps(g, g), _mm256_set1_ps(kTwoCubic),
                                                        _mm256_set1_ps(kTwoSqrt2OverPi)));
  const __m256 e = exp8(_mm256_sub_ps(_mm256_setzero_ps(), two_z));
  return _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e)), u);
}

// gate[i] = f(gate[i], up[i]) 8 at a time; the last 1-7 through the same
// formula, padded with zeros.
template <__m256 (*F)(__m256, __m256)>
void gated(float* gate, const float* up, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(gate + i, F(_mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i)));
  if (i < n) {
    alignas(32) float g[8] = {}, u[8] = {};
    for (size_t t = 0; i + t < n; ++t) {
      g[t] = gate[i + t];
      u[t] = up[i + t];
    }
    _mm256_store_ps(g, F(_mm256_load_ps(g), _mm256_load_ps(u)));
    for (size_t t = 0; i + t < n; ++t) gate[i + t] = g[t];
  }
}

}  // namespace

// The scalar rmsnorm's arithmetic (squares rounded to float, summed in
// double, then x * scale * weight left to right) with the double sum in 4
// accumulators of 4 lanes instead of one chain: that order changes the sum by
// at most ~n * 2^-53 of itself, below the f32 rounding of the mean it becomes.
// The one chain of n dependent double adds was ~590 ns a row of 576, a tenth
// of a decode step's non-matmul time (microbench rmsnorm/576).
void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  __m256d acc[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd()};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    const __m256 sa = _mm256_mul_ps(a, a), sb = _mm256_mul_ps(b, b);
    acc[0] = _mm256_add_pd(acc[0], _mm256_cvtps_pd(_mm256_castps256_ps128(sa)));
    acc[1] = _mm256_add_pd(acc[1], _mm256_cvtps_pd(_mm256_extractf128_ps(sa, 1)));
    acc[2] = _mm256_add_pd(acc[2], _mm256_cvtps_pd(_mm256_castps256_ps128(sb)));
    acc[3] = _mm256_add_pd(acc[3], _mm256_cvtps_pd(_mm256_extractf128_ps(sb, 1)));
  }
  const __m256d s4 = _mm256_add_pd(_mm256_add_pd(acc[0], acc[1]), _mm256_add_pd(acc[2], acc[3]));
  const __m128d s2 = _mm_add_pd(_mm256_castpd256_pd128(s4), _mm256_extractf128_pd(s4, 1));
  double ss = _mm_cvtsd_f64(_mm_add_sd(s2, _mm_unpackhi_pd(s2, s2)));
  for (; i < n; ++i) ss += double(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
  const __m256 vs = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(weight + i)));
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void silu_mul(float* gate, const float* up, size_t n) { gated<silu_mul8>(gate, up, n); }
void gelu_mul(float* gate, const float* up, size_t n) { gated<gelu_mul8>(gate, up, n); }

}  // namespace kvlab::kernels::avx2
