#include "kernels/cpu.h"

#include <cpuid.h>

#include <atomic>
#include <cstring>

#include "common/error.h"

namespace kvlab::kernels {
namespace {

// XCR0 bits: the OS saves YMM (bits 1-2) and ZMM/opmask state (bits 5-7).
// Without them the instructions fault even when CPUID advertises them.
uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (uint64_t(edx) << 32) | eax;
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & bit_OSXSAVE;
  const uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm = (xcr0 & 0x6) == 0x6;
  const bool zmm = (xcr0 & 0xe6) == 0xe6;
  f.fma = ymm && (c & bit_FMA);
  f.f16c = ymm && (c & bit_F16C);
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    f.avx2 = ymm && (b & bit_AVX2);
    f.avx512f = zmm && (b & bit_AVX512F);
    f.avx512bw = zmm && (b & bit_AVX512BW);
    f.avx512vl = zmm && (b & bit_AVX512VL);
    f.avx512dq = zmm && (b & bit_AVX512DQ);
    f.avx512vnni = zmm && (c & bit_AVX512VNNI);
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avx512bf16 = f.avx512f && (a & bit_AVX512BF16);
  char brand[49] = {};
  if (unsigned(__get_cpuid_max(0x80000000, nullptr)) >= 0x80000004u) {  // int in clang's cpuid.h, unsigned in GCC's
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002 + i, &a, &b, &c, &d);
      std::memcpy(brand + 16 * i, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &c, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
  }
  f.model = brand;
  while (!f.model.empty() && f.model.back() == ' ') f.model.pop_back();
  return f;
}

std::atomic<int> g_forced{-1};

}  // namespace

Isa CpuFeatures::best() const {
  const bool avx2_ok = avx2 && fma && f16c;
  if (avx2_ok && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni) return Isa::Avx512;
  if (avx2_ok) return Isa::Avx2;
  return Isa::Scalar;
}

const CpuFeatures& cpu() {
  static const CpuFeatures f = detect();
  return f;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Scalar: return "scalar";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

Isa active_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? Isa(forced) : cpu().best();
}

void set_isa(Isa isa) {
  if (int(isa) > int(cpu().best()))
    throw Error(std::string("this CPU cannot run the ") + isa_name(isa) + " kernels (best: " + isa_name(cpu().best()) + ")");
  g_forced.store(int(isa), std::memory_order_relaxed);
}

}  // namespace kvlab::kernels
