// CPU feature detection, done once at start-up. Kernels are compiled per ISA
// (files *_avx2.cpp, *_avx512.cpp with their own target flags) and chosen by
// these flags at run time, so one binary runs on any x86-64.
#pragma once
#include <string>

namespace kvlab::kernels {

// Amx: the AVX-512 set with the prefill and batched-decode matmuls of the
// rows-of-8 formats on the tile unit (rows16_amx_avx512.cpp).
enum class Isa { Scalar, Avx2, Avx512, Amx };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  bool avx512bf16 = false;  // vdpbf16ps: the bf16 kernels of the AVX-512 set (dot_bf16_avx512bf16.cpp)
  // AMX: CPUID's AMX-TILE and AMX-INT8; the OS manages tile state (XCR0
  // bits 17-18); and Linux granted this process the tile data
  // (arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), asked for once at
  // detection). Without the grant the first tile instruction faults.
  bool amx_tile = false, amx_int8 = false, amx_os = false, amx_granted = false;
  std::string model;  // brand string
  // The best kernel set this CPU can run (AVX2 needs FMA and F16C too; the
  // AVX-512 set needs F, BW, VL, DQ and VNNI, so Skylake-SP runs AVX2; the
  // AMX set needs all of that and all four AMX flags).
  Isa best() const;
};

const CpuFeatures& cpu();  // detected on first call
const char* isa_name(Isa isa);

// The ISA the kernels use: default_isa(), or another the CPU can run forced
// with set_isa() (KVLAB_ISA; tests run every available level against the
// scalar reference).
Isa active_isa();
// cpu().best(), except that the tile kernels are opt-in (KVLAB_ISA=amx):
// they are checked bit for bit, but not yet timed against the VNNI set on
// an AMX machine (bench/prefill-peak does, beside each other).
Isa default_isa();
void set_isa(Isa isa);  // throws kvlab::Error when the CPU lacks it
// Tests only: Isa::Amx on an AVX-512 CPU without a usable tile unit, its
// tile kernels run on a scalar model of the unit (tile_unit.h), so their
// packing and order are checked on every AVX-512 CPU.
void emulate_tiles(bool on);
bool tiles_emulated();

}  // namespace kvlab::kernels
