#include "lab/hardware/formats.h"

#include <array>
#include <cmath>
#include <string>

#include "common/error.h"

namespace kvlab::perf {

namespace {

// Block formats: bits = 8 · block bytes / block elements (ggml's layouts):
// q8_0 = 34 B / 32, q4_1 = 20 B / 32, q4_0 = 18 B / 32, q5_0 = 22 B / 32,
// q5_1 = 24 B / 32; the k-quants' super-blocks of 256: q4_k = 144 B,
// q5_k = 176 B, q6_k = 210 B. Where two share a size, the first listed is
// the one nearest_weight_format names.
constexpr std::array<NumberFormat, 13> kFormats{{
    {"f32", 32.0, Precision::FP32, true, false, "IEEE single"},
    {"f16", 16.0, Precision::FP16, true, false, "IEEE half; the fp16 tensor rate (bf16's where none is printed)"},
    {"bf16", 16.0, Precision::BF16, true, false, "bfloat16"},
    {"fp8", 8.0, Precision::FP8, true, false, "e4m3 weights with per-tensor scale; fp8 tensor math"},
    {"int8", 8.0, Precision::BF16, false, true, "weight-only int8, one scale per output channel"},
    {"q8_0", 8.5, Precision::FP16, true, true, "ggml q8_0: blocks of 32 int8 + f16 scale"},
    {"q4_1", 5.0, Precision::FP16, false, true, "ggml q4_1: blocks of 32 nibbles + f16 scale and min"},
    {"q4_0", 4.5, Precision::FP16, true, true, "ggml q4_0: blocks of 32 nibbles + f16 scale"},
    {"q6_k", 6.5625, Precision::FP16, false, true, "ggml q6_k: 6-bit values, 16 int8 scales and an f16 scale per 256"},
    {"q5_1", 6.0, Precision::FP16, false, true, "ggml q5_1: blocks of 32 5-bit values + f16 scale and min"},
    {"q5_0", 5.5, Precision::FP16, false, true, "ggml q5_0: blocks of 32 5-bit values + f16 scale"},
    {"q5_k", 5.5, Precision::FP16, false, true, "ggml q5_k: 5-bit values, 8 6-bit scales and mins and f16 scales per 256"},
    {"q4_k", 4.5, Precision::FP16, false, true, "ggml q4_k: nibbles, 8 6-bit scales and mins and f16 scales per 256"},
}};

std::string names(bool kv_only) {
  std::string s;
  for (const NumberFormat& f : kFormats) {
    if (kv_only && !f.for_kv) continue;
    if (!s.empty()) s += ", ";
    s += f.name;
  }
  return s;
}

}  // namespace

std::string_view precision_name(Precision p) {
  switch (p) {
    case Precision::FP32:
      return "fp32";
    case Precision::TF32:
      return "tf32";
    case Precision::BF16:
      return "bf16";
    case Precision::FP16:
      return "fp16";
    case Precision::FP8:
      return "fp8";
    case Precision::INT8:
      return "int8";
  }
  return "?";
}

std::span<const NumberFormat> number_formats() { return kFormats; }

const NumberFormat& weight_format(std::string_view name) {
  for (const NumberFormat& f : kFormats)
    if (f.name == name) return f;
  throw Error("unknown weight format '" + std::string(name) + "' (expected one of: " + names(false) + ")");
}

const NumberFormat& kv_format(std::string_view name) {
  for (const NumberFormat& f : kFormats)
    if (f.name == name && f.for_kv) return f;
  throw Error("unknown KV cache format '" + std::string(name) + "' (expected one of: " + names(true) + ")");
}

const NumberFormat& nearest_weight_format(double bits) {
  const NumberFormat* best = &kFormats[0];
  for (const NumberFormat& f : kFormats)
    if (std::fabs(f.bits - bits) < std::fabs(best->bits - bits)) best = &f;
  return *best;
}

Precision parse_precision(std::string_view name) {
  for (Precision p :
       {Precision::FP32, Precision::TF32, Precision::BF16, Precision::FP16, Precision::FP8, Precision::INT8})
    if (precision_name(p) == name) return p;
  throw Error("unknown compute precision '" + std::string(name) + "' (expected fp32, tf32, bf16, fp16, fp8 or int8)");
}

}  // namespace kvlab::perf
