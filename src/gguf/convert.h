// Re-encodes a GGUF model's weights in another format (`kvlab quantize`):
// every matrix (2-D tensor) is dequantized with its reference codec and
// quantized to the target; vectors (norm weights) stay f32. Metadata is copied
// unchanged apart from general.file_type.
#pragma once
#include <functional>
#include <string>

#include "gguf/file.h"
#include "tensor/dtype.h"

namespace kvlab::gguf {

struct ConvertStats {
  uint64_t tensors = 0, converted = 0;
  uint64_t fallback = 0;  // matrices written in the target's fallback format
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t matrix_weights = 0, matrix_bytes_out = 0;  // matrices only (norm vectors stay f32)
  double matrix_bits_per_weight() const {
    return matrix_weights ? 8.0 * double(matrix_bytes_out) / double(matrix_weights) : 0.0;
  }
};

// A matrix whose rows are not a whole number of target blocks is written in
// the target's fallback format (DTypeInfo::fallback). Throws kvlab::Error
// when there is none, or on I/O failure (the output is written atomically).
ConvertStats convert_file(const File& in, const std::string& out_path, tensor::DType target,
                          const std::function<void(const std::string& tensor)>& progress = {});

}  // namespace kvlab::gguf
