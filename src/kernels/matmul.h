// Y = X · Wᵀ for a weight matrix stored row-major in any supported dtype:
//   W: [rows][cols]  (GGUF dims {cols, rows}; one output feature per row)
//   X: [n_tokens][cols] f32,  Y: [n_tokens][rows] f32
// n_tokens = 1 is decode (GEMV, bandwidth-bound); n_tokens = T is prefill
// (GEMM, compute-bound). Both call the same per-(row, token) dot product, so
// one token's output does not depend on the batch it was computed in.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/range_split.h"
#include "kernels/thread_pool.h"
#include "tensor/dtype.h"

namespace kvlab::kernels {

// How a matrix's blocks are ordered in memory: as in GGUF (each row's blocks
// contiguous), or re-laid out in groups of 8 rows for the SIMD kernels
// (kernels/rows8.h). Same bytes, same size; only the order differs.
enum class Layout { RowMajor, Rows8 };

struct WeightMatrix {
  tensor::DType dtype = tensor::DType::F32;
  const uint8_t* data = nullptr;  // rows * row_bytes, read-only (mmap)
  size_t rows = 0;                // output features
  size_t cols = 0;                // input features
  size_t row_bytes = 0;
  Layout layout = Layout::RowMajor;
  size_t bytes() const { return rows * row_bytes; }
};

// Reusable buffer for the converted activations; grows, never shrinks, so the
// hot loop does not allocate after the first step.
struct MatmulScratch {
  std::vector<uint8_t> act;
  std::vector<float> act_scales;  // rows-of-8 matrices: kernels/rows8.h
  std::vector<float> widened;     // 16-bit activations as f32 for the float tiles (kernels/dot.h)
  RangeSplit split;  // decode: the rows still to do, per thread
};

// Several matrices of the same width applied to one input (Q, K and V; gate
// and up): Y_m = X · W_mᵀ for each. The input is converted once per
// activation format and all their rows are one job for the pool.
struct MatmulOut {
  const WeightMatrix* w;
  float* y;  // [n_tokens][w->rows]
};
inline constexpr size_t kMaxShared = 4;
void matmul(std::span<const MatmulOut> outs, const float* x, size_t n_tokens, ThreadPool& pool, MatmulScratch& scratch);

inline void matmul(const WeightMatrix& w, const float* x, size_t n_tokens, float* y, ThreadPool& pool,
                   MatmulScratch& scratch) {
  const MatmulOut out{&w, y};
  matmul(std::span<const MatmulOut>(&out, 1), x, n_tokens, pool, scratch);
}

// Reference: dequantize each row and accumulate in double. Slow; for tests.
void matmul_reference(const WeightMatrix& w, const float* x, size_t n_tokens, float* y);

}  // namespace kvlab::kernels
