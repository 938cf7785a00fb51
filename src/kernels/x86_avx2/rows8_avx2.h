// Pieces the rows-of-8 AVX2 kernels share (kernels/rows8.h), for the
// *_avx2.cpp files only (they are compiled with -mavx2; nothing else may
// include this).
#pragma once
#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvlab::kernels::avx2 {

// 4 activation bytes in every 32-bit lane: they meet 4 quants of each of the
// 8 rows at once.
inline __m256i broadcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof v);
  return _mm256_set1_epi32(v);
}
// The 8 rows' f16 header values (side by side in a group's block), as f32.
inline __m256 load_halves8(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// Passes v through an empty asm statement, which GCC cannot see into, so
// the additions of a sum stay in program order, each product consumed as it
// is made. Left free, GCC regroups them (integer addition is associative)
// and computes all the products of several tokens first, which needs more
// than the 16 ymm registers: 11 spilled products per block in the q4_1
// kernel, 64 stack accesses in the q8_0 one.
inline void in_order(__m256i& v) { __asm__("" : "+x"(v)); }

// Software prefetch this far ahead of the block being multiplied. A decode
// matmul gives each thread one sequential range of rows (matmul.cpp), and the
// hardware prefetcher alone leaves the core short of bandwidth (default model,
// 2 threads, tg128: ~190 -> ~210 tok/s at 1 KiB; 512 B and 2-4 KiB did less).
// The lines past a range's end it touches are the next range's: harmless.
constexpr size_t kPrefetchAhead = 1024;

inline void prefetch_ahead(const uint8_t* blk, size_t block_bytes) {
  for (size_t o = 0; o < block_bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchAhead + o), _MM_HINT_T0);
}

}  // namespace kvlab::kernels::avx2
