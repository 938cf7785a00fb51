// The ISAs this CPU can run, and a scope that makes one of them active. On
// an AVX-512 CPU without a usable AMX unit, Amx runs the tile kernels on the
// scalar model of the unit (kernels::emulate_tiles).
#pragma once
#include <vector>

#include "kernels/cpu.h"

namespace kvlab::test {

inline std::vector<kernels::Isa> available_isas() {
  using kernels::Isa;
  std::vector<Isa> out{Isa::Scalar};
  if (int(kernels::cpu().best()) >= int(Isa::Avx2)) out.push_back(Isa::Avx2);
  if (int(kernels::cpu().best()) >= int(Isa::Avx512)) out.push_back(Isa::Avx512), out.push_back(Isa::Amx);
  return out;
}

struct IsaGuard {
  explicit IsaGuard(kernels::Isa isa) : before_(kernels::active_isa()) {
    kernels::emulate_tiles(isa == kernels::Isa::Amx && kernels::cpu().best() != kernels::Isa::Amx);
    kernels::set_isa(isa);
  }
  ~IsaGuard() {
    kernels::emulate_tiles(false);
    kernels::set_isa(before_);
  }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;

 private:
  kernels::Isa before_;
};

}  // namespace kvlab::test
