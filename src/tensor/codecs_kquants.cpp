// Scalar reference codecs for the K-quants (layouts in blocks.h) and their
// activation format Q8_K. Dequantization follows the formats' definitions
// operation for operation. The quantizers are kvlab's own: a least-squares
// fit of each sub-block's scale and minimum (Q4_K, Q5_K) and a max-magnitude
// scale (Q6_K); llama.cpp searches harder (and can weight by an importance
// matrix), so its files of the same format may be a little more accurate.
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/half.h"

namespace kvlab::tensor {
namespace {

constexpr int kSub = 32;            // Q4_K / Q5_K sub-block
constexpr int kSub6 = 16;           // Q6_K sub-block
constexpr int kScaleMax = 63;       // six-bit sub-block scales and minimums

// Nearest integer in [lo, hi], clamped before the conversion so that no
// value (inf or NaN from a bad file included) overflows it; NaN gives lo.
int round_clamp(float v, int lo, int hi) {
  const float r = std::nearbyint(v);
  return r >= float(lo) ? (r <= float(hi) ? int(r) : hi) : lo;
}

void pack_scale_min(const int sc[8], const int mn[8], uint8_t out[kKScaleBytes]) {
  std::fill_n(out, kKScaleBytes, uint8_t(0));
  for (int j = 0; j < 4; ++j) {
    out[j] = uint8_t(sc[j]);
    out[j + 4] = uint8_t(mn[j]);
  }
  for (int j = 4; j < 8; ++j) {
    out[j + 4] = uint8_t((sc[j] & 0x0f) | (mn[j] & 0x0f) << 4);
    out[j - 4] |= uint8_t((sc[j] >> 4) << 6);
    out[j] |= uint8_t((mn[j] >> 4) << 6);
  }
}

// Least-squares fit of x ~ scale * q + offset over one sub-block for fixed
// quants q in 0..nmax, alternated with re-rounding q to the new grid. Each
// half-step lowers the squared error, starting from the min/max grid. The
// format subtracts a non-negative minimum, so the offset stays <= 0.
void fit_sub_block(const float* x, int n, int nmax, float& scale, float& offset) {
  const auto [lo, hi] = std::minmax_element(x, x + n);
  offset = std::min(0.f, *lo);
  scale = (*hi - offset) / float(nmax);
  if (scale <= 0.f) return;
  for (int iter = 0; iter < 4; ++iter) {
    double sq = 0, sqq = 0, sx = 0, sxq = 0;
    for (int l = 0; l < n; ++l) {
      const int q = round_clamp((x[l] - offset) / scale, 0, nmax);
      sq += q, sqq += double(q) * q, sx += x[l], sxq += double(x[l]) * q;
    }
    const double det = n * sqq - sq * sq;
    if (det <= 0) return;
    double sc = (n * sxq - sq * sx) / det, off = (sx - sc * sq) / n;
    if (off > 0) off = 0, sc = sqq > 0 ? sxq / sqq : 0;  // offset clamped at 0: refit the scale alone
    if (sc <= 0) return;
    scale = float(sc), offset = float(off);
  }
}

// Q4_K and Q5_K share everything but the quant width: x ~ d*sc*q - dmin*m with
// q in 0..nmax. Each sub-block's scale and minimum come from fit_sub_block;
// the super-block's d and dmin are the largest of them over 63.
// `store(l, q)` writes weight l's quant into the format's bit layout.
template <class Store>
void quantize_superblock_k(const float* x, int nmax, uint16_t& d16, uint16_t& dmin16, uint8_t scales[kKScaleBytes],
                           Store store) {
  float scale[8], minv[8], max_scale = 0.f, max_min = 0.f;
  for (int j = 0; j < 8; ++j) {
    float offset;
    fit_sub_block(x + j * kSub, kSub, nmax, scale[j], offset);
    minv[j] = -offset;
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, minv[j]);
  }
  d16 = f32_to_f16(max_scale / kScaleMax);
  dmin16 = f32_to_f16(max_min / kScaleMax);
  const float d = f16_to_f32(d16), dmin = f16_to_f32(dmin16);
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = d > 0.f ? round_clamp(scale[j] / d, 0, kScaleMax) : 0;
    mn[j] = dmin > 0.f ? round_clamp(minv[j] / dmin, 0, kScaleMax) : 0;
  }
  pack_scale_min(sc, mn, scales);
  for (int j = 0; j < 8; ++j) {
    const float ds = d * float(sc[j]), dm = dmin * float(mn[j]);
    for (int l = j * kSub; l < (j + 1) * kSub; ++l) store(l, ds > 0.f ? round_clamp((x[l] + dm) / ds, 0, nmax) : 0);
  }
}

// Weight l of a super-block lives in 64-weight chunk c = l / 64; its low four
// bits are in qs[32c + l % 32], low nibble for the chunk's first 32 weights.
inline int q4_index(int l) { return l / 64 * 32 + l % 32; }
inline int q4_shift(int l) { return l % 64 < 32 ? 0 : 4; }

// x = d*sc[j]*q - dmin*m[j] for sub-block j. Weight l's low four bits are
// nibble q4_shift(l) of qs[q4_index(l)]; Q5_K's fifth bit is bit l / 32 of
// qh[l % 32].
template <class Block>
void dequantize_row_q45_k(const void* src, float* dst, size_t n) {
  auto* b = static_cast<const Block*>(src);
  for (size_t i = 0; i < n / kQK_K; ++i) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int l = 0; l < kQK_K; ++l, ++dst) {
      const ScaleMin sm = kquant_scale_min(b[i].scales, l / kSub);
      int q = (b[i].qs[q4_index(l)] >> q4_shift(l)) & 0x0f;
      if constexpr (std::is_same_v<Block, BlockQ5_K>) q |= ((b[i].qh[l % 32] >> (l / 32)) & 1) << 4;
      *dst = d * float(sm.scale) * float(q) - dmin * float(sm.min);
    }
  }
}

}  // namespace

// ---- Q4_K -----------------------------------------------------------------

void dequantize_row_q4_k(const void* src, float* dst, size_t n) { dequantize_row_q45_k<BlockQ4_K>(src, dst, n); }
void quantize_row_q4_k(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ4_K*>(dst);
  for (size_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    std::fill_n(b[i].qs, sizeof b[i].qs, uint8_t(0));
    quantize_superblock_k(src, 15, b[i].d, b[i].dmin, b[i].scales,
                          [&](int l, int q) { b[i].qs[q4_index(l)] |= uint8_t(q << q4_shift(l)); });
  }
}

// ---- Q5_K: Q4_K's nibbles plus bit 4 in qh[l % 32], bit l / 32 ---------------

void dequantize_row_q5_k(const void* src, float* dst, size_t n) { dequantize_row_q45_k<BlockQ5_K>(src, dst, n); }
void quantize_row_q5_k(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ5_K*>(dst);
  for (size_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    std::fill_n(b[i].qs, sizeof b[i].qs, uint8_t(0));
    std::fill_n(b[i].qh, sizeof b[i].qh, uint8_t(0));
    quantize_superblock_k(src, 31, b[i].d, b[i].dmin, b[i].scales, [&](int l, int q) {
      b[i].qs[q4_index(l)] |= uint8_t((q & 0x0f) << q4_shift(l));
      b[i].qh[l % 32] |= uint8_t((q >> 4) << (l / 32));
    });
  }
}

// ---- Q6_K: x = d * scale[l / 16] * (q - 32) ----------------------------------
// Weight l = 128h + 32k + m (m < 32) has its low nibble in ql[64h + m + 32(k&1)]
// (high nibble when k >= 2) and its top two bits at bit 2k of qh[32h + m].

namespace {
inline int q6_low_index(int l) { return l / 128 * 64 + l % 32 + (l / 32 % 2) * 32; }
inline int q6_low_shift(int l) { return l % 128 >= 64 ? 4 : 0; }
inline int q6_high_index(int l) { return l / 128 * 32 + l % 32; }
inline int q6_high_shift(int l) { return 2 * (l / 32 % 4); }
}  // namespace

void dequantize_row_q6_k(const void* src, float* dst, size_t n) {
  auto* b = static_cast<const BlockQ6_K*>(src);
  for (size_t i = 0; i < n / kQK_K; ++i) {
    const float d = f16_to_f32(b[i].d);
    for (int l = 0; l < kQK_K; ++l, ++dst) {
      const int q = ((b[i].ql[q6_low_index(l)] >> q6_low_shift(l)) & 0x0f) |
                    ((b[i].qh[q6_high_index(l)] >> q6_high_shift(l)) & 3) << 4;
      *dst = d * float(b[i].scales[l / kSub6]) * float(q - 32);
    }
  }
}
// Each 16-weight sub-block's scale maps its largest-magnitude weight, with its
// sign, to q = 0 (as Q4_0 does); the int8 scales are those over d = max / 127.
void quantize_row_q6_k(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ6_K*>(dst);
  for (size_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    float scale[kQK_K / kSub6], amax_scale = 0.f;
    for (int s = 0; s < kQK_K / kSub6; ++s) {
      scale[s] = signed_absmax(src + s * kSub6, kSub6) / -32.f;
      amax_scale = std::max(amax_scale, std::fabs(scale[s]));
    }
    b[i].d = f32_to_f16(amax_scale / 127.f);
    const float d = f16_to_f32(b[i].d);
    std::fill_n(b[i].ql, sizeof b[i].ql, uint8_t(0));
    std::fill_n(b[i].qh, sizeof b[i].qh, uint8_t(0));
    for (int s = 0; s < kQK_K / kSub6; ++s) {
      b[i].scales[s] = int8_t(d > 0.f ? round_clamp(scale[s] / d, -128, 127) : 0);
      const float ds = d * float(b[i].scales[s]);
      for (int l = s * kSub6; l < (s + 1) * kSub6; ++l) {
        const int q = ds != 0.f ? round_clamp(src[l] / ds, -32, 31) + 32 : 32;
        b[i].ql[q6_low_index(l)] |= uint8_t((q & 0x0f) << q6_low_shift(l));
        b[i].qh[q6_high_index(l)] |= uint8_t((q >> 4) << q6_high_shift(l));
      }
    }
  }
}

// ---- Q8_K: activations, x = d * q with the largest magnitude at -127 --------

void quantize_row_q8_k(const float* src, void* dst, size_t n) {
  auto* b = static_cast<BlockQ8_K*>(dst);
  for (size_t i = 0; i < n / kQK_K; ++i, src += kQK_K) {
    const float max = signed_absmax(src, kQK_K);
    if (max == 0.f) {
      b[i] = BlockQ8_K{};
      continue;
    }
    const float iscale = -127.f / max;
    for (int l = 0; l < kQK_K; ++l) b[i].qs[l] = int8_t(round_clamp(iscale * src[l], -128, 127));
    for (int s = 0; s < kQK_K / 16; ++s) {
      int sum = 0;
      for (int l = 16 * s; l < 16 * (s + 1); ++l) sum += b[i].qs[l];
      b[i].bsums[s] = int16_t(sum);
    }
    b[i].d = 1.f / iscale;
  }
}

}  // namespace kvlab::tensor
