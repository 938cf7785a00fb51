// Reference codecs against values computed by hand from the format
// definitions (blocks.h), plus round-trip error bounds on random data.
#include <gtest/gtest.h>

#include <cmath>
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
      }
      for (size_t j = b; j < b + 32; ++j)
        // Q4_0 maps the extreme element to -8 exactly, so the opposite extreme
        // is clamped at +7 and may be off by a whole step.
        ASSERT_LE(std::fabs(x[j] - y[j]), step * (info.type == DType::Q4_0 ? 1.0f : 0.5f) + amax * 2e-3f) << info.name << " n=" << n << " j=" << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFormats, CodecRoundTrip,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q8_0, DType::Q4_0, DType::Q4_1),
                         [](const auto& p) { return std::string(dtype_info(p.param).name); });

TEST(DTypeTable, SizesAndNames) {
  EXPECT_EQ(dtype_info(DType::Q4_1).bits_per_weight(), 5.0);
  EXPECT_EQ(dtype_info(DType::Q4_0).bits_per_weight(), 4.5);
  EXPECT_EQ(dtype_info(DType::Q8_0).bits_per_weight(), 8.5);
  EXPECT_EQ(parse_dtype("bf16"), DType::BF16);
  EXPECT_EQ(parse_dtype("q4_k"), std::nullopt);
  EXPECT_EQ(find_dtype(12), nullptr);  // Q4_K: not yet supported
  EXPECT_EQ(row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_EQ(row_bytes(DType::Q8_0, 65), std::nullopt);
}

}  // namespace
}  // namespace kvlab::tensor
