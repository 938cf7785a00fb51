// bf16 weights on AVX-512 CPUs that have AVX512_BF16 (Zen 4, Sapphire
// Rapids; not Ice Lake): vdpbf16ps multiplies 32 bf16 pairs and adds them
// into 16 f32 lanes in one instruction, with no widening of either side,
// where the FMA kernels widen both and do 16 products per instruction
// (dot_float_avx512.cpp).
//
// Every (row, token) result comes from one chain, the same in dot, dot4 and
// the prefill tile, so a token's output does not depend on its batch:
// 16 lanes from zero; each step adds 32 elements with vdpbf16ps (lane i
// takes the step's elements 2i and 2i + 1); the last step loads the
// elements past n as zeros (a product of +0: the same in every path); then
// the lanes are summed, the two halves first (hsum_avx2.h). The
// instruction flushes denormal inputs and results to zero and rounds after
// each of its two products (Intel SDM, VDPBF16PS), so its sums differ from
// the scalar reference's by float rounding, not bit for bit; bf16 products
// are exact in f32 either way (8-bit significands).
#include <immintrin.h>

#include <array>
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/float_tiles.h"
#include "kernels/row_prefetch.h"
#include "kernels/x86_avx2/hsum_avx2.h"

namespace kvlab::kernels::avx512bf16 {
namespace {

constexpr size_t kStep = 32;  // elements per vdpbf16ps

// A step's elements from p; in the last step, those past the end (mask bit
// clear) as zeros.
inline __m512bh bf16x32(const uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
inline __m512bh bf16x32(const uint16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

// NR weight rows against NT activation rows, every pair its own chain.
// Rows past n_rows repeat the last one and are not stored.
template <int NR, int NT>
void chains(const uint16_t* const* w, const uint16_t* const* a, size_t n, size_t n_rows, float* y, size_t y_stride) {
  __m512 acc[NR][NT];
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) acc[r][t] = _mm512_setzero_ps();
  auto step = [&](size_t i, auto load) {
    if constexpr (NR == 1) prefetch_row_ahead(w[0] + i);  // one row streamed from DRAM: dot, dot4
    __m512bh wv[NR];
    for (int r = 0; r < NR; ++r) wv[r] = load(w[r] + i);
    for (int t = 0; t < NT; ++t) {
      const __m512bh av = load(a[t] + i);
      for (int r = 0; r < NR; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], av);
    }
  };
  // The whole steps with plain loads, then the last one masked (masked loads
  // in every step made GCC keep acc in memory, stored every step).
  size_t i = 0;
  for (; i + kStep <= n; i += kStep) step(i, [](const uint16_t* p) { return bf16x32(p); });
  if (i < n) {
    const __mmask32 m = (__mmask32(1) << (n - i)) - 1;
    step(i, [m](const uint16_t* p) { return bf16x32(p, m); });
  }
  for (int r = 0; r < NR; ++r)
    for (int t = 0; t < NT; ++t) {
      const float s = hsum(acc[r][t]);
      if (size_t(r) < n_rows) y[size_t(t) * y_stride + size_t(r)] = s;
    }
}

float dot(const void* w, const void* a, size_t n) {
  const auto* wr = static_cast<const uint16_t*>(w);
  const auto* ar = static_cast<const uint16_t*>(a);
  float out;
  chains<1, 1>(&wr, &ar, n, 1, &out, 1);
  return out;
}

void dot4(const void* w, const void* act, size_t stride, size_t n, float* out) {
  const auto* wr = static_cast<const uint16_t*>(w);
  std::array<const uint16_t*, 4> a;
  for (size_t t = 0; t < 4; ++t)
    a[t] = reinterpret_cast<const uint16_t*>(static_cast<const uint8_t*>(act) + t * stride);
  chains<1, 4>(&wr, a.data(), n, 1, out, 1);
}

// 4 rows x 6 tokens: 24 accumulators, 4 row vectors and an activation
// vector in the 32 registers.
void tile(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows, size_t n_tokens,
          size_t n, float* y, size_t y_stride) {
  for_each_float_tile<uint16_t, uint16_t, 4, 6>(
      w, w_stride, act, act_stride, n_rows, n_tokens, y, y_stride,
      [&]<int NT>(const uint16_t* const* rows, const uint16_t* const* tokens, size_t nr, float* yt) {
        chains<4, NT>(rows, tokens, n, nr, yt, y_stride);
      });
}

}  // namespace

DotKernel bf16_kernel(const DotKernel& base) {
  DotKernel k = base;  // the activation conversion: bf16 rounding as everywhere
  k.dot = dot;
  k.dot4 = dot4;
  k.rows4 = rows4_by_rows<dot>;
  k.float_tile = tile;
  k.tile_act = ActFormat::BF16;
  return k;
}

}  // namespace kvlab::kernels::avx512bf16
