#include "kernels/rows8.h"

#include <cstring>
#include <vector>

#include "kernels/dot.h"
#include "tensor/blocks.h"
#include "tensor/half.h"

namespace kvlab::kernels {
namespace {

// A quantized block as f16 header values and its other bytes (quant bytes;
// for q5_0 / q5_1 first the 4 bytes of fifth bits), moved in runs of 4. The
// headers lead every GGUF block but q6_k's, whose d comes last.
struct BlockShape {
  size_t halves;  // q8_0, q4_0, q5_0, q6_k: 1 (d); q4_1, q5_1: 2 (d, m); q4_k, q5_k: 2 (d, dmin)
  size_t quants;  // the rest: 32 for q8_0, 16 for q4_0/q4_1, 20 for q5_0/q5_1, 140 for q4_k, 172 for q5_k, 208 for q6_k
  bool header_last;
  // Where the headers and the quants start in a GGUF block.
  size_t src_header() const { return header_last ? quants : 0; }
  size_t src_quants() const { return header_last ? 0 : 2 * halves; }
};

BlockShape block_shape(tensor::DType t) {
  const tensor::DTypeInfo& info = tensor::dtype_info(t);
  const size_t halves =
      t == tensor::DType::Q4_1 || t == tensor::DType::Q5_1 || t == tensor::DType::Q4_K || t == tensor::DType::Q5_K ? 2 : 1;
  return {halves, info.block_bytes - 2 * halves, t == tensor::DType::Q6_K};
}

// Offsets inside one column block of a group (see rows8.h).
size_t header_offset(size_t k, size_t r) { return 2 * (k * kRows8 + r); }
size_t quant_offset(const BlockShape& s, size_t j, size_t r) {
  return 2 * s.halves * kRows8 + (j / 4) * 4 * kRows8 + r * 4 + j % 4;
}

}  // namespace

bool rows8_available(const WeightMatrix& w) {
  return w.layout == Layout::RowMajor && w.rows % kRows8 == 0 && dot_kernel(w.dtype).rows8 != nullptr;
}

static_assert(sizeof(tensor::BlockQ6_K) >= sizeof(tensor::BlockQ5_K), "dequantize_row's block buffer holds any block");
static_assert((sizeof(tensor::BlockQ6_K) - 2) % 4 == 0, "q6_k's quant bytes (all but d) are whole runs of 4");

bool relayout_rows8(WeightMatrix& w, uint8_t* data) {
  if (!rows8_available(w)) return false;
  const BlockShape s = block_shape(w.dtype);
  const size_t block_bytes = 2 * s.halves + s.quants, n_blocks = w.row_bytes / block_bytes;
  const size_t group_bytes = kRows8 * w.row_bytes;
  std::vector<uint8_t> rows(group_bytes);
  for (uint8_t* group = data; group < data + w.bytes(); group += group_bytes) {
    std::memcpy(rows.data(), group, group_bytes);
    for (size_t r = 0; r < kRows8; ++r)
      for (size_t b = 0; b < n_blocks; ++b) {
        const uint8_t* src = rows.data() + r * w.row_bytes + b * block_bytes;
        uint8_t* dst = group + b * kRows8 * block_bytes;
        for (size_t k = 0; k < s.halves; ++k) std::memcpy(dst + header_offset(k, r), src + s.src_header() + 2 * k, 2);
        for (size_t j = 0; j < s.quants; j += 4) std::memcpy(dst + quant_offset(s, j, r), src + s.src_quants() + j, 4);
      }
  }
  w.layout = Layout::Rows8;
  return true;
}

void rows8_act_scales(ActFormat f, const void* act_row, size_t n, float* out) {
  if (f == ActFormat::Q8_K) return;  // its scale is f32 already; the q4_k kernel reads it in place
  const size_t nb = n / tensor::kQK;
  if (f == ActFormat::Q8_1) {
    const auto* b = static_cast<const tensor::BlockQ8_1*>(act_row);
    for (size_t i = 0; i < nb; ++i) {
      out[2 * i] = tensor::f16_to_f32(b[i].d);
      out[2 * i + 1] = tensor::f16_to_f32(b[i].s);
    }
  } else {
    const auto* b = static_cast<const tensor::BlockQ8_0*>(act_row);
    for (size_t i = 0; i < nb; ++i) {
      int sum = 0;
      for (int8_t q : b[i].qs) sum += q;
      out[2 * i] = tensor::f16_to_f32(b[i].d);
      out[2 * i + 1] = float(sum);
    }
  }
}

void dequantize_row(const WeightMatrix& w, size_t r, float* out) {
  const tensor::DTypeInfo& info = tensor::dtype_info(w.dtype);
  if (w.layout == Layout::RowMajor) {
    info.dequantize(w.data + r * w.row_bytes, out, w.cols);
    return;
  }
  const BlockShape s = block_shape(w.dtype);
  const size_t block_bytes = 2 * s.halves + s.quants, n_blocks = w.row_bytes / block_bytes;
  const uint8_t* group = w.data + (r / kRows8) * kRows8 * w.row_bytes;
  const size_t lane = r % kRows8;
  uint8_t block[sizeof(tensor::BlockQ6_K)];  // one block of row r, put back in GGUF order (q6_k's is the largest)
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* src = group + b * kRows8 * block_bytes;
    for (size_t k = 0; k < s.halves; ++k) std::memcpy(block + s.src_header() + 2 * k, src + header_offset(k, lane), 2);
    for (size_t j = 0; j < s.quants; j += 4) std::memcpy(block + s.src_quants() + j, src + quant_offset(s, j, lane), 4);
    info.dequantize(block, out + b * info.block_size, info.block_size);
  }
}

}  // namespace kvlab::kernels
