// Element-wise and row-wise ops of the transformer layer. Scalar code the
// compiler vectorises, except silu_mul, whose e^x it cannot, and rmsnorm,
// whose double sum it may not reorder: those have AVX2 versions
// (ops_avx2.cpp), used when the CPU has it. They are a small share of the
// time next to matmul.
#pragma once
#include <cmath>
#include <cstddef>

namespace kvlab::kernels {

// RMSNorm (Zhang & Sennrich 2019): out = x / sqrt(mean(x²) + eps) * weight.
// The sum of squares is accumulated in double, as GGML does, so long rows
// lose no precision. `out` may alias `x`. The AVX2 version (ops_avx2.cpp)
// sums in another order; the tests hold it to the scalar one within 2 ulp.
void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out);
namespace avx2 { void rmsnorm(const float* x, const float* weight, size_t n, float eps, float* out); }

// Rotary position embedding (Su et al. 2021, RoFormer) on one head vector of
// `head_dim` floats at position `pos`, rotating the first `rope_dim` dims.
// Pair i rotates by angle pos * theta^(-2i/rope_dim).
//  neox == false: pairs (x[2i], x[2i+1])        (llama, GGUF-permuted weights)
//  neox == true:  pairs (x[i], x[i + rope_dim/2]) (gpt-neox, qwen2, gemma)
// `cos_sin` holds rope_dim/2 (cos, sin) pairs for that position (rope_table).
void rope(float* x, size_t rope_dim, const float* cos_sin, bool neox);
// How a model stretches RoPE's angles for long contexts, in llama.cpp's order:
//  freq_divisors (rope_dim/2 of them, or nullptr) divide each pair's angle
//    first: Llama 3's rule, which slows the low-frequency pairs (GGUF tensor
//    rope_freqs), and Phi-3's LongRoPE (rope_factors_long / _short);
//  freq_scale < 1 is linear position interpolation: every angle times it;
//  attn_factor multiplies every cos and sin (llama.cpp's attn_factor:
//    LongRoPE's sqrt(1 + ln(s) / ln(n_orig)), which sharpens attention);
//  ext_factor != 0 is YaRN (Peng et al. 2023, as ggml's rope_yarn runs it):
//    pair i turns by a mix of the scaled angle and the unscaled one,
//    mix = ext_factor * (1 - clamp((i - ramp_low) / max(0.001, ramp_high - ramp_low), 0, 1)),
//    so the fast pairs below ramp_low keep their angles and the slow ones
//    above ramp_high are interpolated; cos and sin also take
//    1 + 0.1 ln(1 / freq_scale).
struct RopeScaling {
  float freq_scale = 1.0f;
  const float* freq_divisors = nullptr;
  float attn_factor = 1.0f;
  float ext_factor = 0.0f;
  float ramp_low = 0.0f, ramp_high = 0.0f;

  // What every cos and sin is multiplied by.
  float magnitude() const {
    return ext_factor != 0.0f ? attn_factor * (1.0f + 0.1f * std::log(1.0f / freq_scale)) : attn_factor;
  }
};
// Fills rope_dim/2 (cos, sin) pairs for `pos`. The angle is built by repeated
// multiplication by theta^(-2/rope_dim) in float, as llama.cpp does, so the
// rotations match the reference implementation bit for bit in the angle.
void rope_table(int pos, size_t rope_dim, float theta, float* cos_sin, const RopeScaling& scaling = {});

// SwiGLU (Shazeer 2020): gate = silu(gate) * up, silu(x) = x / (1 + e^-x).
// The AVX2 version's e^x is a polynomial (kernels/x86_avx2/exp_avx2.h; the tests hold
// silu_mul to 1e-6 relative). With std::exp per element silu_mul took ~4% of
// a decode step (perf); decode_batch, 1 thread, best of 4 alternating: one
// sequence 6.37 -> 5.97 ms per step, eight 22.8 -> 20.7 ms.
void silu_mul(float* gate, const float* up, size_t n);
namespace avx2 { void silu_mul(float* gate, const float* up, size_t n); }

// GeGLU (Shazeer 2020): gate = gelu(gate) * up, with GELU's tanh form
// (Hendrycks & Gimpel 2016): 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
// The AVX2 version computes it as x / (1 + e^-2z) with silu_mul's e^x (the
// tests hold it to the formula in double, like silu_mul). With std::tanh per
// element, Gemma 3 270M's pp512 spent about a fifth of its samples in
// tanhf, expm1f and gelu_mul (perf).
void gelu_mul(float* gate, const float* up, size_t n);
namespace avx2 { void gelu_mul(float* gate, const float* up, size_t n); }

// In-place softmax with the max subtracted first for stability.
void softmax(float* x, size_t n);

void add(float* acc, const float* x, size_t n);  // acc += x

}  // namespace kvlab::kernels
