#include "kernels/ops.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu.h"

namespace kvlab::kernels {

void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  if (active_isa() >= Isa::Avx2) return avx2::rmsnorm(x, weight, n, eps, out);
  double ss = 0;
  // Squares rounded to float, summed in double: the order GGML uses, so the
  // normalised activations (and their 8-bit quantization) match llama.cpp.
  for (size_t i = 0; i < n; ++i) ss += double(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void rope_table(int pos, size_t rope_dim, float theta, float* cos_sin, const RopeScaling& s) {
  const float step = std::pow(theta, -2.0f / float(rope_dim));
  const float magnitude = s.magnitude(), ramp_width = std::max(0.001f, s.ramp_high - s.ramp_low);
  float angle = float(pos);
  for (size_t i = 0; i < rope_dim / 2; ++i) {
    const float unscaled = s.freq_divisors ? angle / s.freq_divisors[i] : angle;
    const float scaled = s.freq_scale * unscaled;
    float turned = scaled;
    if (s.ext_factor != 0.0f) {
      const float mix = (1.0f - std::min(1.0f, std::max(0.0f, (float(i) - s.ramp_low) / ramp_width))) * s.ext_factor;
      turned = scaled * (1.0f - mix) + unscaled * mix;
    }
    cos_sin[2 * i] = std::cos(turned) * magnitude;
    cos_sin[2 * i + 1] = std::sin(turned) * magnitude;
    angle *= step;
  }
}

void gelu_mul(float* gate, const float* up, size_t n) {
  if (active_isa() >= Isa::Avx2) return avx2::gelu_mul(gate, up, n);
  constexpr float kSqrt2OverPi = 0.7978845608f, kCubic = 0.044715f;
  for (size_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCubic * x * x))) * up[i];
  }
}

void rope(float* x, size_t rope_dim, const float* cos_sin, bool neox) {
  const size_t half = rope_dim / 2;
  for (size_t i = 0; i < half; ++i) {
    const size_t a = neox ? i : 2 * i;
    const size_t b = neox ? i + half : 2 * i + 1;
    const float c = cos_sin[2 * i], s = cos_sin[2 * i + 1];
    const float x0 = x[a], x1 = x[b];
    x[a] = x0 * c - x1 * s;
    x[b] = x0 * s + x1 * c;
  }
}

void silu_mul(float* gate, const float* up, size_t n) {
  if (active_isa() >= Isa::Avx2) return avx2::silu_mul(gate, up, n);
  for (size_t i = 0; i < n; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

void softmax(float* x, size_t n) {
  const float mx = *std::max_element(x, x + n);
  float sum = 0.f;
  for (size_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - mx));
  const float inv = 1.0f / sum;
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
}

void add(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

}  // namespace kvlab::kernels
