#include "tensor/dtype.h"

#include <array>

#include "common/error.h"
#include "tensor/blocks.h"
#include "tensor/codecs.h"

namespace kvlab::tensor {
namespace {

constexpr std::array kTable = {
    DTypeInfo{DType::F32, "f32", 1, 4, dequantize_row_f32, quantize_row_f32},
    DTypeInfo{DType::F16, "f16", 1, 2, dequantize_row_f16, quantize_row_f16},
    DTypeInfo{DType::BF16, "bf16", 1, 2, dequantize_row_bf16, quantize_row_bf16},
    DTypeInfo{DType::Q8_0, "q8_0", kQK, sizeof(BlockQ8_0), dequantize_row_q8_0, quantize_row_q8_0},
    DTypeInfo{DType::Q4_0, "q4_0", kQK, sizeof(BlockQ4_0), dequantize_row_q4_0, quantize_row_q4_0},
    DTypeInfo{DType::Q4_1, "q4_1", kQK, sizeof(BlockQ4_1), dequantize_row_q4_1, quantize_row_q4_1},
};

}  // namespace

const DTypeInfo* find_dtype(uint32_t ggml_id) {
  for (const auto& info : kTable)
    if (uint32_t(info.type) == ggml_id) return &info;
  return nullptr;
}

const DTypeInfo& dtype_info(DType t) {
  const DTypeInfo* info = find_dtype(uint32_t(t));
  if (!info) throw Error("internal: dtype " + std::to_string(uint32_t(t)) + " missing from the table");
  return *info;
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (const auto& info : kTable)
    if (info.name == name) return info.type;
  return std::nullopt;
}

std::optional<size_t> row_bytes(DType t, uint64_t n) {
  const DTypeInfo& info = dtype_info(t);
  if (n % info.block_size != 0) return std::nullopt;
  return size_t(n / info.block_size * info.block_bytes);
}

}  // namespace kvlab::tensor
