// The dtype table: every tensor format kvlab understands, keyed by its GGML
// type id (the number stored in GGUF). Adding a format (Q4_K, Q5_K, Q6_K) is
// one block struct in blocks.h, one row here, and its reference codec.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace kvlab::tensor {

enum class DType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q8_0 = 8,
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
  double bits_per_weight() const { return 8.0 * double(block_bytes) / double(block_size); }
};

// nullptr when the id is not a format kvlab supports.
const DTypeInfo* find_dtype(uint32_t ggml_id);
const DTypeInfo& dtype_info(DType t);
std::optional<DType> parse_dtype(std::string_view name);  // "f16", "q8_0", ...

// Bytes for a row of n elements; nullopt when n is not a whole number of blocks.
std::optional<size_t> row_bytes(DType t, uint64_t n);

}  // namespace kvlab::tensor
