// Row dot products between a weight row and an activation row, per weight
// dtype. Activations are first converted to the format the weight pairs with
// (as GGML does), so the inner loop runs on integers for quantized weights:
//
//   weight   activation   per 32-block
//   f32      f32          plain float FMA
//   f16      f16          both widened to f32
//   bf16     bf16         both widened to f32
//   q8_0     q8_0         d_w*d_x * sum(q_w*q_x)
//   q4_0     q8_0         d_w*d_x * sum((q_w-8)*q_x)
//   q4_1     q8_1         d_w*d_x * sum(q_w*q_x) + m_w*s_x
//   q5_0     q8_0         d_w*d_x * sum((q_w-16)*q_x)
//   q5_1     q8_1         d_w*d_x * sum(q_w*q_x) + m_w*s_x
//
//   per 256-super-block, j over sub-blocks, bsum_j = sum of q_x over j:
//   q4_k/q5_k q8_k        d_w*d_x * sum_j sc_j*sum(q_w*q_x) - dmin_w*d_x * sum_j m_j*bsum_j
//   q6_k     q8_k         d_w*d_x * sum_j sc_j*sum((q_w-32)*q_x)
//
// The scalar set is the reference and the test oracle; SIMD sets must agree
// with it to float rounding (integer sums are exact, only the order of the
// float accumulation differs).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/cpu.h"
#include "tensor/dtype.h"

namespace kvlab::kernels {

enum class ActFormat { F32, F16, BF16, Q8_0, Q8_1, Q8_K };

// Float weights (f32, f16, bf16) against several tokens (prefill): n_rows
// rows `w_stride` bytes apart against n_tokens activation rows of n
// elements in the kernel's tile_act format, `act_stride` bytes apart; row
// r's result for token t goes to y[t * y_stride + r]. Every result is
// bit-identical to dot().
using FloatTile = void (*)(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows,
                           size_t n_tokens, size_t n, float* y, size_t y_stride);

struct DotKernel {
  ActFormat act;
  // Converts one activation row of n floats (n a multiple of 32 for Q8_*).
  void (*quantize_act)(const float* x, void* out, size_t n);
  // Dot product of one weight row and one converted activation row, n elements.
  float (*dot)(const void* w_row, const void* act_row, size_t n);
  // The same for 4 activation rows `act_stride` bytes apart (prefill): the
  // weight row is decoded once per block and reused. Each of the 4 results is
  // bit-identical to dot() on that row (same operations in the same order),
  // so a token's output never depends on the batch it was computed in.
  void (*dot4)(const void* w_row, const void* act, size_t act_stride, size_t n, float* out);
  // 4 weight rows `w_stride` bytes apart against one activation row (decode):
  // four independent accumulation chains, each bit-identical to dot().
  void (*rows4)(const void* w_rows, size_t w_stride, const void* act_row, size_t n, float* out);
  // One group of 8 rows in the rows-of-8 layout (kernels/rows8.h) against
  // 1..rows8_tokens activation rows `act_stride` bytes apart, whose block headers are
  // also given widened to f32 (rows8_act_scales: 2 per block, the token
  // rows `scales_stride` floats apart); token t's 8 results go to
  // y + t * y_stride. Every result is bit-identical to the scalar reference
  // dot() on the row-major row, whatever the token count. nullptr: this
  // dtype has no such kernel at this ISA, and its matrices stay row-major.
  void (*rows8)(const void* group, const void* act, size_t act_stride, const float* scales, size_t scales_stride,
                size_t n_tokens, size_t n, float* y, size_t y_stride) = nullptr;
  // The most tokens one rows8 call takes (the AVX2 kernels' accumulators
  // fill 16 registers at 4; AVX-512 has 32).
  size_t rows8_tokens = 4;
  // Two groups at once, the second `pair_bytes` after the first and its
  // results `pair_rows` after the first's in y, with rows8's results, bit for
  // bit, against any number of tokens (in passes of the kernel's own size).
  // nullptr: none; rows8 does the groups one by one.
  void (*rows16)(const void* group, size_t pair_bytes, const void* act, size_t act_stride, const float* scales,
                 size_t scales_stride, size_t n_tokens, size_t n, float* y, size_t pair_rows, size_t y_stride) = nullptr;
  // Float weights: the prefill tile (FloatTile above). nullptr: none; dot4
  // does the tokens 4 at a time.
  FloatTile float_tile = nullptr;
  // The activations float_tile reads: `act`, or F32 for the exact widening
  // of act's rows (the same numbers dot multiplies, fewer conversions).
  ActFormat tile_act = ActFormat::F32;
};

// dot4 / rows4 for kernels without fused ones: four calls of dot.
template <float (*Dot)(const void*, const void*, size_t)>
void dot4_by_rows(const void* w, const void* act, size_t stride, size_t n, float* out) {
  for (int t = 0; t < 4; ++t) out[t] = Dot(w, static_cast<const uint8_t*>(act) + size_t(t) * stride, n);
}
template <float (*Dot)(const void*, const void*, size_t)>
void rows4_by_rows(const void* w, size_t stride, const void* act, size_t n, float* out) {
  for (int r = 0; r < 4; ++r) out[r] = Dot(static_cast<const uint8_t*>(w) + size_t(r) * stride, act, n);
}

size_t act_row_bytes(ActFormat f, size_t n);
// Throws kvlab::Error when the weight dtype has no kernel.
const DotKernel& dot_kernel(tensor::DType weight, Isa isa);
inline const DotKernel& dot_kernel(tensor::DType weight) { return dot_kernel(weight, active_isa()); }

// Per-ISA tables (nullptr entries fall back to the scalar kernel).
namespace scalar { const DotKernel* find(tensor::DType w); }
namespace avx2 {
const DotKernel* find(tensor::DType w);
const DotKernel* find_kquant(tensor::DType w);  // Q4_K, Q5_K, Q6_K
}  // namespace avx2
// The AVX2 set with VNNI rows-of-8 kernels and float tiles where they exist.
namespace avx512 {
const DotKernel* find(tensor::DType w);
// f32, f16, bf16 (the set for CPUs without AVX512_BF16): base, the AVX2
// set's kernel, with dot_float_avx512.cpp's kernels in it; other types: base.
DotKernel float_kernel(tensor::DType w, DotKernel base);
// find()'s set with rows16 on the AMX tile unit for every rows-of-8 format
// (q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k: rows16_amx_avx512.cpp),
// the same bits; `emulated`: on the scalar model of the unit
// (tile_unit.h), for CPUs without it.
const DotKernel* find_tiled(tensor::DType w, bool emulated);
}  // namespace avx512
// bf16 weights on CPUs with AVX512_BF16: base (the AVX2 set's bf16 kernel)
// with vdpbf16ps dot products and tile.
namespace avx512bf16 { DotKernel bf16_kernel(const DotKernel& base); }

}  // namespace kvlab::kernels
