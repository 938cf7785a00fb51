// Scalar reference codecs, one row at a time. For block formats `n` must be
// a multiple of the block size (32).
#pragma once
#include <cstddef>

namespace kvlab::tensor {

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
void dequantize_row_q8_0(const void* src, float* dst, size_t n);
void quantize_row_q8_0(const float* src, void* dst, size_t n);
// Activations only: Q8_0 plus the scaled block sum (BlockQ8_1).
void quantize_row_q8_1(const float* src, void* dst, size_t n);

}  // namespace kvlab::tensor
