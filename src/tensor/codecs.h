// Scalar reference codecs, one row at a time. For block formats `n` must be
// a multiple of the block size (32, or 256 for the K-quants).
#pragma once
#include <cstddef>

namespace kvlab::tensor {

// The element of largest magnitude, with its sign (the first such one): the
// symmetric formats map it exactly to their most negative quant.
float signed_absmax(const float* x, size_t n);

void dequantize_row_f32(const void* src, float* dst, size_t n);
void quantize_row_f32(const float* src, void* dst, size_t n);
void dequantize_row_f16(const void* src, float* dst, size_t n);
void quantize_row_f16(const float* src, void* dst, size_t n);
void dequantize_row_bf16(const void* src, float* dst, size_t n);
void quantize_row_bf16(const float* src, void* dst, size_t n);
void dequantize_row_q4_0(const void* src, float* dst, size_t n);
void quantize_row_q4_0(const float* src, void* dst, size_t n);
void dequantize_row_q4_1(const void* src, float* dst, size_t n);
void quantize_row_q4_1(const float* src, void* dst, size_t n);
void dequantize_row_q5_0(const void* src, float* dst, size_t n);
void quantize_row_q5_0(const float* src, void* dst, size_t n);
void dequantize_row_q5_1(const void* src, float* dst, size_t n);
void quantize_row_q5_1(const float* src, void* dst, size_t n);
void dequantize_row_q8_0(const void* src, float* dst, size_t n);
void quantize_row_q8_0(const float* src, void* dst, size_t n);
// Activations only: Q8_0 plus the scaled block sum (BlockQ8_1).
void quantize_row_q8_1(const float* src, void* dst, size_t n);

// K-quants (codecs_kquants.cpp).
void dequantize_row_q4_k(const void* src, float* dst, size_t n);
void quantize_row_q4_k(const float* src, void* dst, size_t n);
void dequantize_row_q5_k(const void* src, float* dst, size_t n);
void quantize_row_q5_k(const float* src, void* dst, size_t n);
void dequantize_row_q6_k(const void* src, float* dst, size_t n);
void quantize_row_q6_k(const float* src, void* dst, size_t n);
// Activations only: Q8_K (blocks.h), the pair of the K-quant dot products.
void quantize_row_q8_k(const float* src, void* dst, size_t n);

}  // namespace kvlab::tensor
