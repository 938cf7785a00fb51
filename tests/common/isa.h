// The ISAs this CPU can run, and a scope that makes one of them active.
#pragma once
#include <vector>

#include "kernels/cpu.h"

namespace kvlab::test {

inline std::vector<kernels::Isa> available_isas() {
  using kernels::Isa;
  std::vector<Isa> out{Isa::Scalar};
  if (int(kernels::cpu().best()) >= int(Isa::Avx2)) out.push_back(Isa::Avx2);
  if (kernels::cpu().best() == Isa::Avx512) out.push_back(Isa::Avx512);
  return out;
}

struct IsaGuard {
  explicit IsaGuard(kernels::Isa isa) { kernels::set_isa(isa); }
  ~IsaGuard() { kernels::set_isa(kernels::cpu().best()); }
  IsaGuard(const IsaGuard&) = delete;
  IsaGuard& operator=(const IsaGuard&) = delete;
};

}  // namespace kvlab::test
