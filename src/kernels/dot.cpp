#include "kernels/dot.h"

#include <string>

#include "common/error.h"
#include "tensor/blocks.h"

namespace kvlab::kernels {

size_t act_row_bytes(ActFormat f, size_t n) {
  switch (f) {
    case ActFormat::F32: return n * 4;
    case ActFormat::F16:
    case ActFormat::BF16: return n * 2;
    case ActFormat::Q8_0: return n / tensor::kQK * sizeof(tensor::BlockQ8_0);
    case ActFormat::Q8_1: return n / tensor::kQK * sizeof(tensor::BlockQ8_1);
    case ActFormat::Q8_K: return n / tensor::kQK_K * sizeof(tensor::BlockQ8_K);
  }
  return 0;
}

const DotKernel& dot_kernel(tensor::DType weight, Isa isa) {
  const DotKernel* k = nullptr;
  if (isa == Isa::Amx) k = avx512::find_tiled(weight, tiles_emulated());
  else if (isa == Isa::Avx512) k = avx512::find(weight);
  else if (isa == Isa::Avx2) k = avx2::find(weight);
  if (!k) k = scalar::find(weight);
  if (!k) throw Error("no matmul kernel for weight dtype " + std::string(tensor::dtype_info(weight).name));
  return *k;
}

}  // namespace kvlab::kernels
