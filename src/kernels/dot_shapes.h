// The three call shapes of a DotKernel (dot.h) from one tiled kernel:
// `Tiles::run<NR, NT>(w, w_stride, act, act_stride, n, out)` multiplies NR
// weight rows by NT activation rows into out[r * NT + t]. dot is 1x1, dot4
// (prefill: one weight row, 4 tokens) 1x4, rows4 (decode: 4 rows, 1 token) 4x1.
#pragma once
#include <cstddef>

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

}  // namespace kvlab::kernels
