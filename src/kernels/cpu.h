// CPU feature detection, done once at start-up. Kernels are compiled per ISA
// (files *_avx2.cpp, *_avx512.cpp with their own target flags) and chosen by
// these flags at run time, so one binary runs on any x86-64.
#pragma once
#include <string>

namespace kvlab::kernels {

enum class Isa { Scalar, Avx2, Avx512 };

struct CpuFeatures {
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  bool avx512bf16 = false;  // vdpbf16ps: the bf16 kernels of the AVX-512 set (dot_bf16_avx512bf16.cpp)
  std::string model;  // brand string
  // The best kernel set this CPU can run (AVX2 needs FMA and F16C too; the
  // AVX-512 set needs F, BW, VL, DQ and VNNI, so Skylake-SP runs AVX2).
  Isa best() const;
};

const CpuFeatures& cpu();  // detected on first call
const char* isa_name(Isa isa);

// The ISA the kernels use: cpu().best(), or a lower one forced with
// set_isa() (tests run every available level against the scalar reference).
Isa active_isa();
void set_isa(Isa isa);  // throws kvlab::Error when the CPU lacks it

}  // namespace kvlab::kernels
