// The three call shapes of a DotKernel (dot.h) from one tiled kernel:
// `Tiles::run<NR, NT>(w, w_stride, act, act_stride, n, out)` multiplies NR
// weight rows by NT activation rows into out[r * NT + t]. dot is 1x1, dot4
// (prefill: one weight row, 4 tokens) 1x4, rows4 (decode: 4 rows, 1 token) 4x1.
// And the rows8 entry of a K-quant kernel struct, `Kernel::run<NT>(group,
// act, act_stride, n, y, y_stride)` for NT tokens up to 4.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/tile_count.h"

namespace kvlab::kernels {

template <class Tiles>
float dot_1x1(const void* w, const void* a, size_t n) {
  float r;
  Tiles::template run<1, 1>(w, 0, a, 0, n, &r);
  return r;
}
template <class Tiles>
void dot_1x4(const void* w, const void* a, size_t a_stride, size_t n, float* out) {
  Tiles::template run<1, 4>(w, 0, a, a_stride, n, out);
}
template <class Tiles>
void dot_4x1(const void* w, size_t w_stride, const void* a, size_t n, float* out) {
  Tiles::template run<4, 1>(w, w_stride, a, 0, n, out);
}

// A K-quant kernel struct's rows8 entry (dot.h): its tokens in passes of
// up to 4.
template <class Kernel>
void kquant_rows8(const void* group, const void* act, size_t a_stride, const float*, size_t, size_t n_tokens,
                  size_t n, float* y, size_t y_stride) {
  with_tile_count<4>(n_tokens, [&]<int NT>() {
    Kernel::template run<NT>(static_cast<const uint8_t*>(group), static_cast<const uint8_t*>(act), a_stride, n, y,
                             y_stride);
  });
}

}  // namespace kvlab::kernels
