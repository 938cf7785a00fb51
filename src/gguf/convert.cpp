#include "gguf/convert.h"

#include <vector>

#include "common/error.h"
#include "gguf/writer.h"

namespace kvlab::gguf {
namespace {

// llama.cpp's llama_ftype numbers for a file whose matrices are all one type.
uint32_t file_type(tensor::DType t) {
  switch (t) {
    case tensor::DType::F32: return 0;
    case tensor::DType::F16: return 1;
    case tensor::DType::Q4_0: return 2;
    case tensor::DType::Q4_1: return 3;
    case tensor::DType::Q8_0: return 7;
    case tensor::DType::Q5_0: return 8;
    case tensor::DType::Q5_1: return 9;
    case tensor::DType::Q4_K: return 14;  // the "_S" mixes: K-quant wherever rows allow
    case tensor::DType::Q5_K: return 16;
    case tensor::DType::Q6_K: return 18;
    case tensor::DType::BF16: return 32;
  }
  return 0;
}

}  // namespace

ConvertStats convert_file(const File& in, const std::string& out_path, tensor::DType target,
                          const std::function<void(const std::string&)>& progress) {
  Writer w;
  for (const auto& [key, value] : in.metadata()) {
    if (key == "general.file_type" || key == "general.alignment") continue;
    w.copy_value(key, value);
  }
  w.set_u32("general.file_type", file_type(target));
  if (in.alignment() != 32) {
    w.set_u32("general.alignment", uint32_t(in.alignment()));
    w.set_alignment(uint32_t(in.alignment()));
  }

  ConvertStats st;
  const auto& to = tensor::dtype_info(target);
  std::vector<float> row;
  std::vector<uint8_t> out;
  for (const auto& t : in.tensors()) {
    if (progress) progress(t.name);
    ++st.tensors;
    st.bytes_in += t.n_bytes;
    const bool matrix = t.dims.size() >= 2;
    const auto& from = tensor::dtype_info(t.dtype);
    const uint64_t cols = t.dims[0], rows = t.rows();
    const bool use_fallback = matrix && cols % to.block_size != 0 && to.fallback;
    const tensor::DTypeInfo& dst =
        !matrix ? tensor::dtype_info(tensor::DType::F32) : use_fallback ? tensor::dtype_info(*to.fallback) : to;
    st.fallback += use_fallback;
    const auto out_row = tensor::row_bytes(dst.type, cols);
    if (!out_row)
      throw Error(in.path() + ": tensor '" + t.name + "' rows of " + std::to_string(cols) + " cannot be stored as " +
                  std::string(dst.name) + " (block size " + std::to_string(dst.block_size) + ")");
    const size_t in_row = t.n_bytes / rows;
    row.resize(cols);
    out.resize(*out_row * rows);
    for (uint64_t r = 0; r < rows; ++r) {
      from.dequantize(t.data + r * in_row, row.data(), cols);
      dst.quantize(row.data(), out.data() + r * *out_row, cols);
    }
    if (dst.type != t.dtype) ++st.converted;
    st.bytes_out += out.size();
    if (matrix) st.matrix_weights += cols * rows, st.matrix_bytes_out += out.size();
    w.add_tensor(t.name, t.dims, dst.type, out);
  }
  w.write(out_path);
  return st;
}

}  // namespace kvlab::gguf
