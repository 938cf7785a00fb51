#include "kernels/cpu.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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

// CPUID.(EAX=7, ECX=0):EDX bits 24 and 25 (Intel SDM vol. 2A, CPUID).
// Spelled out: clang's cpuid.h has no bit_AMX_TILE / bit_AMX_INT8.
constexpr unsigned kCpuidAmxTile = 1u << 24, kCpuidAmxInt8 = 1u << 25;

// Linux's per-process permission for the AMX tile data (arch/x86 prctl
// ARCH_REQ_XCOMP_PERM with XFEATURE_XTILEDATA; kernel 5.16 and later).
// Where the request fails (an older kernel, a VM without the feature), the
// tile unit stays unused.
bool request_tile_data() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
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
    f.amx_tile = d & kCpuidAmxTile;
    f.amx_int8 = d & kCpuidAmxInt8;
  }
  f.amx_os = (xcr0 & 0x60000) == 0x60000;  // XTILECFG, XTILEDATA
  f.amx_granted = f.amx_tile && f.amx_int8 && f.amx_os && f.best() >= Isa::Avx512 && request_tile_data();
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
std::atomic<bool> g_emulate_tiles{false};

// The best level this process may select: Amx also where the tile unit is
// emulated (tests) on an AVX-512 CPU.
Isa selectable() {
  const Isa best = cpu().best();
  return best == Isa::Avx512 && tiles_emulated() ? Isa::Amx : best;
}

// Why the tile unit is unusable, for the error message.
std::string amx_missing(const CpuFeatures& f) {
  if (!f.amx_tile || !f.amx_int8) return "its CPUID lists no AMX-TILE and AMX-INT8";
  if (!f.amx_os) return "the OS does not enable the tile state (XCR0)";
  if (!f.amx_granted) return "Linux refused this process the tile data (arch_prctl)";
  return "it lacks the AVX-512 set the tile kernels run with";
}

}  // namespace

Isa CpuFeatures::best() const {
  const bool avx2_ok = avx2 && fma && f16c;
  const bool avx512_ok = avx2_ok && avx512f && avx512bw && avx512vl && avx512dq && avx512vnni;
  if (avx512_ok && amx_tile && amx_int8 && amx_os && amx_granted) return Isa::Amx;
  if (avx512_ok) return Isa::Avx512;
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
    case Isa::Amx: return "amx";
  }
  return "?";
}

Isa default_isa() { return std::min(cpu().best(), Isa::Avx512); }

Isa active_isa() {
  const int forced = g_forced.load(std::memory_order_relaxed);
  return forced >= 0 ? Isa(forced) : default_isa();
}

void set_isa(Isa isa) {
  if (int(isa) > int(selectable()))
    throw Error(std::string("this CPU cannot run the ") + isa_name(isa) + " kernels (best: " + isa_name(cpu().best()) +
                (isa == Isa::Amx ? "; " + amx_missing(cpu()) : std::string()) + ")");
  g_forced.store(int(isa), std::memory_order_relaxed);
}

void emulate_tiles(bool on) { g_emulate_tiles.store(on, std::memory_order_relaxed); }
bool tiles_emulated() { return g_emulate_tiles.load(std::memory_order_relaxed) && cpu().best() != Isa::Amx; }

}  // namespace kvlab::kernels
