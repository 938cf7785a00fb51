// Causal scaled dot-product attention for one query head over the cached
// positions of its sequence (Vaswani et al. 2017):
//   out = sum_j softmax_j(q·k_j * scale) v_j,   j = 0 .. n_pos-1
// It streams over the KV rows: the scores of one head need n_pos floats of
// scratch, never an n×n matrix, in decode and prefill alike.
#pragma once
#include <cstddef>
#include <cstdint>

#include "tensor/dtype.h"

namespace kvlab::kernels {

// The K and V rows of one KV head of one sequence. Positions are grouped in
// blocks of `block_tokens` consecutive rows (`row_stride` apart); logical
// block b lives at physical block blocks[b], `block_stride` bytes apart
// (the paged KV cache). blocks == nullptr: one contiguous run of rows.
struct KvView {
  const uint8_t* k = nullptr;  // K row 0 of physical block 0, offset to this KV head
  const uint8_t* v = nullptr;  // V row 0 of physical block 0, likewise
  size_t row_stride = 0;       // bytes between positions of a block
  tensor::DType type = tensor::DType::F32;  // f32, f16 or q8_0
  const int32_t* blocks = nullptr;
  int block_tokens = 0;
  size_t block_stride = 0;
};

// q: head_dim floats. q_conv: scratch of head_dim*4 bytes for q in the K
// type's activation format (f16 K: f16 q; q8_0 K: q8_0 q, as the matmuls do).
// scores: scratch of n_pos floats. out: head_dim floats.
void attend(const float* q, const KvView& kv, int n_pos, size_t head_dim, float scale, void* q_conv,
            float* scores, float* out);

// y += a * row, with row in f32, f16 or q8_0. Per-ISA, like the dot products.
using AxpyFn = void (*)(float a, const void* row, float* y, size_t n);
AxpyFn axpy_kernel(tensor::DType row_type);
namespace scalar { AxpyFn find_axpy(tensor::DType t); }
namespace avx2 { AxpyFn find_axpy(tensor::DType t); }

}  // namespace kvlab::kernels
