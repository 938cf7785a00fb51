// Reference codecs against values computed by hand from the format
// definitions (blocks.h), plus round-trip error bounds on random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <random>

#include "tensor/blocks.h"
#include "tensor/codecs.h"
#include "tensor/dtype.h"
#include "tensor/half.h"

namespace kvlab::tensor {
namespace {

TEST(Half, KnownF16Encodings) {
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);          // largest finite
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);          // rounds up to inf
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -26)), 0x0000);  // underflows to zero
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);      // tie -> even
  EXPECT_EQ(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);  // tie -> even (up)
  EXPECT_EQ(f32_to_f16(INFINITY), 0x7C00);
  EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(NAN))));
  EXPECT_EQ(f16_to_f32(0x3555), 0.333251953125f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_f32(0x8000), -0.0f);
}

TEST(Half, F16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00) continue;  // inf/nan
    ASSERT_EQ(f32_to_f16(f16_to_f32(uint16_t(h))), h) << h;
  }
}

TEST(Half, KnownBf16Encodings) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(-3.0f), 0xC040);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(std::bit_cast<float>(0x3F818000u)), 0x3F82);
}

TEST(Codecs, Q8_0KnownBlock) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16);  // amax 16 -> d = 16/127
  BlockQ8_0 b;
  quantize_row_q8_0(x, &b, 32);
  EXPECT_EQ(b.d, f32_to_f16(16.0f / 127.0f));
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[16], 0);
  EXPECT_EQ(b.qs[17], 8);  // 1 * 127/16 = 7.94 -> 8
  float y[32];
  dequantize_row_q8_0(&b, y, 32);
  EXPECT_FLOAT_EQ(y[17], 8 * f16_to_f32(b.d));
}

TEST(Codecs, Q4_0KnownBlockIsExact) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float((j % 16) - 8);  // -8..7, extreme -8: d = 1
  BlockQ4_0 b;
  quantize_row_q4_0(x, &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  EXPECT_EQ(b.qs[0], 0x00);      // q = 0 and 0 (x = -8 in both halves)
  EXPECT_EQ(b.qs[15], 0xFF);     // x = 7 -> q = 15
  float y[32];
  dequantize_row_q4_0(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

TEST(Codecs, Q4_1KnownBlockIsExact) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = 2.0f + float(j % 16);  // min 2, max 17: d = 1, m = 2
  BlockQ4_1 b;
  quantize_row_q4_1(x, &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  EXPECT_EQ(f16_to_f32(b.m), 2.0f);
  EXPECT_EQ(b.qs[3], 0x33);  // element 3 -> q 3 (low), element 19 -> q 3 (high)
  float y[32];
  dequantize_row_q4_1(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

TEST(Codecs, Q8_1CarriesTheScaledSum) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j) * 0.25f - 3.0f;
  BlockQ8_1 b;
  quantize_row_q8_1(x, &b, 32);
  int sum = 0;
  for (int j = 0; j < 32; ++j) sum += b.qs[j];
  EXPECT_EQ(b.s, f32_to_f16(float(sum) * (4.75f / 127.0f)));  // amax = |x[31]| = 4.75
}

// Round trip of random rows: every element within half a quantization step
// (plus the fp16 rounding of the scales) of the original.
class CodecRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(CodecRoundTrip, ErrorWithinHalfAStep) {
  const DTypeInfo& info = dtype_info(GetParam());
  std::mt19937 rng(42);
  std::normal_distribution<float> d(0.f, 2.f);
  for (size_t n : {32u, 96u, 160u, 4096u}) {
    std::vector<float> x(n), y(n);
    for (auto& v : x) v = d(rng);
    std::vector<uint8_t> q(n / info.block_size * info.block_bytes);
    info.quantize(x.data(), q.data(), n);
    info.dequantize(q.data(), y.data(), n);
    for (size_t b = 0; b < n; b += 32) {
      float lo = x[b], hi = x[b], amax = 0;
      for (size_t j = b; j < b + 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]), amax = std::max(amax, std::fabs(x[j]));
      float step = 0;
      switch (info.type) {
        case DType::F32: step = 0; break;
        case DType::F16: step = amax * 1e-3f; break;
        case DType::BF16: step = amax * 8e-3f; break;
        case DType::Q8_0: step = amax / 127.f; break;
        case DType::Q4_0: step = amax / 8.f; break;
        case DType::Q4_1: step = (hi - lo) / 15.f; break;
        case DType::Q5_0: step = amax / 16.f; break;
        case DType::Q5_1: step = (hi - lo) / 31.f; break;
        default: FAIL() << info.name << ": K-quants have their own test";
      }
      // Q4_0 / Q5_0 map the extreme element to -8 (-16) exactly, so the
      // opposite extreme is clamped at +7 (+15) and may be off by a whole step.
      const bool symmetric = info.type == DType::Q4_0 || info.type == DType::Q5_0;
      for (size_t j = b; j < b + 32; ++j)
        ASSERT_LE(std::fabs(x[j] - y[j]), step * (symmetric ? 1.0f : 0.5f) + amax * 2e-3f) << info.name << " n=" << n << " j=" << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CodecRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q5_1),
                         [](const auto& p) { return std::string(dtype_info(p.param).name); });

TEST(Codecs, Q5_0KnownBlockIsExact) {
  float x[32];
  for (int j = 0; j < 32; ++j) x[j] = float(j - 16) * 0.5f;  // -8..7.5, extreme -8: d = 0.5
  BlockQ5_0 b;
  quantize_row_q5_0(x, &b, 32);
  EXPECT_EQ(f16_to_f32(b.d), 0.5f);
  EXPECT_EQ(b.qs[1], 0x11);  // q[1] = 1, q[17] = 17: low bits 1 and 1
  const uint32_t qh = uint32_t(b.qh[0]) | uint32_t(b.qh[1]) << 8 | uint32_t(b.qh[2]) << 16 | uint32_t(b.qh[3]) << 24;
  EXPECT_EQ(qh, 0xFFFF0000u);  // q >= 16 exactly for elements 16..31
  float y[32];
  dequantize_row_q5_0(&b, y, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]);
}

// x = sc_j * q - m_j with d = dmin = 1 (some sub-block has scale 63 and some
// minimum 63, the six-bit maximum): every value is on the grid and the
// quantizer must find it, including the scales >= 16 of sub-blocks 4..7 whose
// top bits go to the spare bits of the first eight scale bytes.
TEST(Codecs, Q4_KAndQ5_KKnownSuperBlocksAreExact) {
  const int sc[8] = {63, 1, 7, 20, 33, 17, 48, 5}, mn[8] = {0, 63, 2, 40, 9, 16, 31, 60};
  for (const int nmax : {15, 31}) {
    float x[kQK_K];
    for (int l = 0; l < kQK_K; ++l) x[l] = float(sc[l / 32] * ((l * 7) % (nmax + 1)) - mn[l / 32]);
    for (int j = 0; j < 8; ++j) x[32 * j] = float(-mn[j]), x[32 * j + 1] = float(sc[j] * nmax - mn[j]);  // full range
    const DType t = nmax == 15 ? DType::Q4_K : DType::Q5_K;
    const DTypeInfo& info = dtype_info(t);
    std::vector<uint8_t> q(info.block_bytes);
    info.quantize(x, q.data(), kQK_K);
    const uint8_t* scales = q.data() + 4;  // after d and dmin in both layouts
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(kquant_scale_min(scales, j).scale, sc[j]) << info.name << " j=" << j;
      EXPECT_EQ(kquant_scale_min(scales, j).min, mn[j]) << info.name << " j=" << j;
    }
    float y[kQK_K];
    info.dequantize(q.data(), y, kQK_K);
    for (int l = 0; l < kQK_K; ++l) ASSERT_EQ(y[l], x[l]) << info.name << " l=" << l;
  }
}

TEST(Codecs, Q6_KKnownSuperBlockIsExact) {
  // Sub-block i holds scale s_i * (q - 32) with its extreme at q = 0 and the
  // largest |s_i| = 127 so d = 1.
  const int s[16] = {127, -3, 5, 60, -127, 1, 2, 90, -45, 11, 64, 100, -7, 33, 17, 8};
  float x[kQK_K];
  for (int l = 0; l < kQK_K; ++l) x[l] = float(s[l / 16] * ((l * 5) % 64 - 32));
  for (int i = 0; i < 16; ++i) x[16 * i] = float(s[i] * -32);
  BlockQ6_K b;
  quantize_row_q6_k(x, &b, kQK_K);
  EXPECT_EQ(f16_to_f32(b.d), 1.0f);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(b.scales[i], s[i]) << i;
  float y[kQK_K];
  dequantize_row_q6_k(&b, y, kQK_K);
  for (int l = 0; l < kQK_K; ++l) ASSERT_EQ(y[l], x[l]) << l;
}

// Random rows whose scale varies between sub-blocks (as real weight rows'
// do): every weight within two steps of its sub-block's range (the fitted
// grid may clip an outlier to lower the error of the rest; a wrong bit
// layout is off by the whole range),
// and the per-sub-block scales pay off: Q4_K's relative RMS error is below
// Q4_0's at the same 4.5 bits per weight, Q5_K's below Q5_0's at 5.5, and
// Q6_K's below Q5_K's.
TEST(Codecs, KQuantRoundTripBeatsLegacyBlocksOfTheirSize) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 1.f);
  const size_t n = 64 * kQK_K;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = nd(rng) * (1.f + float(i % 512) / 64.f);
  std::map<DType, double> rel;
  for (const DType t : {DType::Q4_0, DType::Q4_K, DType::Q5_0, DType::Q5_K, DType::Q6_K}) {
    const DTypeInfo& info = dtype_info(t);
    std::vector<float> y(n);
    std::vector<uint8_t> q(n / info.block_size * info.block_bytes);
    info.quantize(x.data(), q.data(), n);
    info.dequantize(q.data(), y.data(), n);
    const int sub = t == DType::Q6_K ? 16 : 32;
    const float levels = t == DType::Q4_0 || t == DType::Q4_K ? 15.f : t == DType::Q6_K ? 63.f : 31.f;
    double err2 = 0, ref2 = 0;
    for (size_t s0 = 0; s0 < n; s0 += size_t(sub)) {
      const auto [lo, hi] = std::minmax_element(&x[s0], &x[s0 + size_t(sub)]);
      const float step = (std::max(*hi, 0.f) - std::min(*lo, 0.f)) / levels;
      for (size_t i = s0; i < s0 + size_t(sub); ++i) {
        ASSERT_LE(std::fabs(x[i] - y[i]), 2 * step) << info.name << " i=" << i;
        err2 += double(x[i] - y[i]) * (x[i] - y[i]), ref2 += double(x[i]) * x[i];
      }
    }
    rel[t] = std::sqrt(err2 / ref2);
    std::printf("  %s: relative RMS error %.4f\n", std::string(info.name).c_str(), rel[t]);
  }
  EXPECT_LT(rel[DType::Q4_K], rel[DType::Q4_0]);
  EXPECT_LT(rel[DType::Q5_K], rel[DType::Q5_0]);
  EXPECT_LT(rel[DType::Q6_K], rel[DType::Q5_K]);
}

TEST(DTypeTable, SizesAndNames) {
  EXPECT_EQ(dtype_info(DType::Q4_1).bits_per_weight(), 5.0);
  EXPECT_EQ(dtype_info(DType::Q4_0).bits_per_weight(), 4.5);
  EXPECT_EQ(dtype_info(DType::Q8_0).bits_per_weight(), 8.5);
  EXPECT_EQ(dtype_info(DType::Q5_0).bits_per_weight(), 5.5);
  EXPECT_EQ(dtype_info(DType::Q5_1).bits_per_weight(), 6.0);
  EXPECT_EQ(dtype_info(DType::Q4_K).bits_per_weight(), 4.5);
  EXPECT_EQ(dtype_info(DType::Q5_K).bits_per_weight(), 5.5);
  EXPECT_EQ(dtype_info(DType::Q6_K).bits_per_weight(), 6.5625);
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_dtype("q4_k"), DType::Q4_K);
  EXPECT_EQ(parse_dtype("q3_k"), std::nullopt);
  EXPECT_EQ(find_dtype(11), nullptr);  // Q3_K: not supported
  EXPECT_EQ(find_dtype(14)->name, "q6_k");
  EXPECT_EQ(dtype_info(DType::Q4_K).fallback, DType::Q5_0);  // llama.cpp's choice for rows of 576
  EXPECT_EQ(dtype_info(DType::Q6_K).fallback, DType::Q8_0);
  EXPECT_EQ(dtype_info(DType::Q4_1).fallback, std::nullopt);
  EXPECT_EQ(row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 65), std::nullopt);
  EXPECT_EQ(row_bytes(DType::Q4_K, 1536), 864u);
  EXPECT_EQ(row_bytes(DType::Q4_K, 576), std::nullopt);
}

}  // namespace
}  // namespace kvlab::tensor
