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
    DTypeInfo{DType::Q5_0, "q5_0", kQK, sizeof(BlockQ5_0), dequantize_row_q5_0, quantize_row_q5_0},
    DTypeInfo{DType::Q5_1, "q5_1", kQK, sizeof(BlockQ5_1), dequantize_row_q5_1, quantize_row_q5_1},
    DTypeInfo{DType::Q4_K, "q4_k", kQK_K, sizeof(BlockQ4_K), dequantize_row_q4_k, quantize_row_q4_k, DType::Q5_0},
    DTypeInfo{DType::Q5_K, "q5_k", kQK_K, sizeof(BlockQ5_K), dequantize_row_q5_k, quantize_row_q5_k, DType::Q5_1},
    DTypeInfo{DType::Q6_K, "q6_k", kQK_K, sizeof(BlockQ6_K), dequantize_row_q6_k, quantize_row_q6_k, DType::Q8_0},
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

std::span<const DTypeInfo> all_dtypes() { return kTable; }

std::optional<size_t> row_bytes(DType t, uint64_t n) {
  const DTypeInfo& info = dtype_info(t);
  if (n % info.block_size != 0) return std::nullopt;
  return size_t(n / info.block_size * info.block_bytes);
}

}  // namespace kvlab::tensor
