// The rows-of-8 weight layout: a quantized matrix re-laid out so that the
// SIMD kernels read 8 rows' blocks of one column together.
//
// In GGUF a row's blocks are contiguous. A dot product then has to reduce each
// block's 32 products horizontally before it can be scaled, once per row and
// block. Interleaving 8 rows puts one row in each 32-bit lane of a 256-bit
// vector: the 8 rows' scales load as one vector, four activation bytes are
// broadcast against four bytes of every row at once, and a block's integer
// sums come out one per lane with no horizontal step. (GGML's CPU "repack"
// kernels interleave rows for the same reason.)
//
// A group of 8 rows occupies exactly the bytes it did before, so the change is
// made in place, group by group. Within a group, column block b is
//
//   half  h[k][r]                 header value k (q8_0, q4_0, q5_0: d; q4_1, q5_1: d, m;
//                                 q4_k: d, dmin) of row r
//   byte  qs[(j/4)*32 + r*4 + j%4]  byte j after the headers of row r's block
//
// i.e. the headers of the 8 rows side by side, then the other bytes in runs
// of 4 per row. For q4_0 and q4_1 each 32-byte run holds, per row, 4 low
// nibbles (elements 4c..4c+3) and the matching high nibbles (elements
// 16+4c..): the GGUF byte unchanged. For q5_0 and q5_1 the first run holds
// the rows' 32-bit words of fifth bits, one row per lane, then the nibbles.
// A q4_k block is a 256-weight super-block: its 12 scale bytes make the first
// three runs, then its 128 quant bytes (dot_kquants_avx2.cpp); a q5_k
// block has its 32 bytes of fifth bits (8 runs) between the two. A q6_k block
// (d last in GGUF, first here) has 52 runs: its 128 bytes of low nibbles
// (runs 0-31), 64 of high bit pairs (32-47), 16 int8 scales (48-51).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/dot.h"
#include "kernels/matmul.h"
#include "tensor/blocks.h"

namespace kvlab::kernels {

inline constexpr size_t kRows8 = 8;

// True when `w` is in row-major layout, its dtype has a rows-of-8 kernel at
// the active ISA, and its row count is a multiple of 8.
bool rows8_available(const WeightMatrix& w);

// Re-lays out `w` in place when rows8_available(w). `data` is w.data, writable.
// Returns whether it did.
bool relayout_rows8(WeightMatrix& w, uint8_t* data);

// The headers of one converted activation row widened to f32 once, 2 floats
// per 32-block: q8_1 d and s; q8_0 d and the block's quant sum sum(q_x),
// exact in f32 (|sum| <= 32*127), which the VNNI kernels need to use signed
// weights as unsigned ones (dot_avx512.cpp). The rows-of-8 kernels meet each
// activation block once per group of 8 rows; widening its f16 headers there
// every time made the q4_1 GEMM 5-13% slower (microbench, 1 thread, 64 and
// 512 tokens, best of 3 alternating runs; q8_0 unchanged).
inline size_t rows8_scale_floats(size_t n) { return 2 * (n / tensor::kQK); }
void rows8_act_scales(ActFormat f, const void* act_row, size_t n, float* out);

// Row `r` of `w`, in either layout, dequantized to n = w.cols floats (the
// embedding lookup reads rows of a matrix the LM head may have re-laid out).
void dequantize_row(const WeightMatrix& w, size_t r, float* out);

}  // namespace kvlab::kernels
