// The dtype table: every tensor format kvlab understands, keyed by its GGML
// type id (the number stored in GGUF). Adding a format is one block struct in
// blocks.h, one row here, its reference codec, and its dot product
// (kernels/dot.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace kvlab::tensor {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  BF16 = 30,
};

// Scalar reference codecs, row-wise. `n` must be a multiple of block_size.
using DequantizeRowFn = void (*)(const void* src, float* dst, size_t n);
using QuantizeRowFn = void (*)(const float* src, void* dst, size_t n);

struct DTypeInfo {
  DType type;
  std::string_view name;     // "q4_1", as used on the CLI and in GGUF tooling
  size_t block_size;         // elements per block (1 for plain floats)
  size_t block_bytes;        // bytes per block
  DequantizeRowFn dequantize;
  QuantizeRowFn quantize;
  // What a converter writes instead for a row that is not a whole number of
  // this format's blocks (llama.cpp's choice: the K-quants' rows of 576 in
  // SmolLM2 become q5_0 / q5_1 / q8_0); none for the 32-blocks.
  std::optional<DType> fallback = std::nullopt;
  double bits_per_weight() const { return 8.0 * double(block_bytes) / double(block_size); }
};

// nullptr when the id is not a format kvlab supports.
const DTypeInfo* find_dtype(uint32_t ggml_id);
const DTypeInfo& dtype_info(DType t);
std::optional<DType> parse_dtype(std::string_view name);  // "f16", "q8_0", ...
std::span<const DTypeInfo> all_dtypes();

// Bytes for a row of n elements; nullopt when n is not a whole number of blocks.
std::optional<size_t> row_bytes(DType t, uint64_t n);

}  // namespace kvlab::tensor
