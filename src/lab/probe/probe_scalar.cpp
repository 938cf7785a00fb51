// Baseline loops of `kvlab probe`, for CPUs without AVX2 + FMA + F16C: plain
// C++ compiled for the baseline target (x86-64: SSE2), which is what the
// engine's scalar kernels get too. The compiler may vectorize them with SSE2;
// the op counts are per source-level operation, so they hold either way.
#include <cstdint>

#include "lab/probe/probe.h"

namespace kvlab::perf::probe_kernels {
namespace {

uint64_t read_sum(const void* p, size_t bytes) {
  const uint64_t* w = static_cast<const uint64_t*>(p);
  const size_t n = bytes / 8;
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 += w[i];
    s1 += w[i + 1];
    s2 += w[i + 2];
    s3 += w[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

// 16 independent multiply-add chains (no FMA at this level: a multiply and an
// add, 2 FLOP). Converges to 1, never denormal.
constexpr int kAcc = 16;
double fp32(uint64_t iters) {
  float c[kAcc];
  for (int j = 0; j < kAcc; ++j) c[j] = 0.1f * float(j + 1);
  const float a = 0.999999f, b = 1e-6f;
  for (uint64_t i = 0; i < iters; ++i)
    for (int j = 0; j < kAcc; ++j) c[j] = c[j] * a + b;
  double r = 0;
  for (float f : c) r += f;
  return r;
}

// 16 int8 x int8 multiply-adds into int32 per iteration. The empty asm
// statement makes the inputs opaque each time, so the products are not hoisted.
double int8(uint64_t iters) {
  int8_t x[kAcc], y[kAcc];
  int32_t acc[kAcc] = {};
  for (int j = 0; j < kAcc; ++j) x[j] = int8_t(j + 1), y[j] = int8_t(3 - j);
  for (uint64_t i = 0; i < iters; ++i) {
    __asm__ volatile("" : : "r"(x), "r"(y) : "memory");
    for (int j = 0; j < kAcc; ++j) acc[j] += int32_t(x[j]) * int32_t(y[j]);
  }
  double r = 0;
  for (int32_t v : acc) r += v;
  return r;
}

}  // namespace

const Kernels& scalar() {
  static const Kernels k{
      "scalar",
      read_sum,
      fp32,
      kAcc * 2.0,
      "scalar multiply + add, 16 independent chains (baseline code)",
      int8,
      kAcc * 2.0,
      "scalar int8 x int8 -> int32 multiply-add (baseline code)",
  };
  return k;
}

}  // namespace kvlab::perf::probe_kernels
