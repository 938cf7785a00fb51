// The walks over K that the SIMD score kernels share (attention_avx2.cpp,
// attention_avx512.cpp): f32 and f16 rows in tiles of NR rows, the K and V
// rows ahead prefetched, the last rows padded; a q8_0 K's tiles
// (kv_tiles.h) one after another; and the tiled kernels' prefetch. Templates
// and inline pieces only, called from each file's own kernels, so every
// instance belongs to one file and is built for its ISA.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/attention.h"
#include "kernels/kv_tiles.h"
#include "kernels/tile_count.h"

namespace kvlab::kernels {

// The K and V rows this far ahead are prefetched while a tile is scored. A
// decode step's rows come from DRAM, and the hardware prefetchers alone keep
// too few of them in flight. One step's attention at 2048 positions on one
// thread (bench/micro_attention.cpp, attend_step layers:30, best of 4-5
// alternating runs): no prefetch 5.67 ms, K 5.46 ms; in another pair of
// runs K 4.30 ms, K and V 3.89 ms. 32 rows (4 KiB of f16 K, 2 KiB of q8_0)
// rather than 8: one step's attention at 2048 positions on 2 threads from
// DRAM (attend_batch layers:90, 3 alternating rounds) f16 5.82 -> 5.66 ms,
// q8_0 4.89 -> 4.70 ms with the AVX2 pieces, 4.55 -> 4.32 ms with the VNNI
// ones (64 rows: 4.36); in cache (attend pos:1024) unchanged. Past the end
// of a run it touches the next block's rows: harmless.
inline constexpr int kAttnPrefetchRows = 32;

// The tiled kernels (f16 and q8_0 K tiles, f16 V rows, q8_0 V tiles) ask
// for every line of the K or V run they read this many bytes ahead, into
// L2, as they go: one prefetch per line, among the loads of the line it
// stands for. A decode step's K and V come from DRAM, and on Sapphire
// Rapids the hardware prefetchers alone kept too few lines in flight: one
// step's attention at position 2048 on 2 threads (bench/micro_attention.cpp,
// attend_batch layers:90, AVX-512) took f16 10.1 ms without, 7.1 ms at
// 2 KiB into L1, 5.6-6.1 ms at 8 KiB into L2, 6.2-6.4 ms at 16 KiB; q8_0
// 5.6-6.3 ms without, 3.4-3.6 ms at 8 KiB. Ahead of K only or V only, f16
// took 8.0 and 8.4 ms. On Zen 4, prefetches of K and V lines 4-32 KiB
// ahead had changed the same step by 0.98x-1.08x. In cache, unchanged
// (attend/f16/pos:1024, attend_batch layers:1). Past the end of a run the
// prefetches touch the next chunk's lines (usually the ones read next) or
// other lines of the cache: harmless.
inline constexpr size_t kAttnStreamAhead = 8192;
[[gnu::always_inline]] inline void prefetch_stream(const uint8_t* line) {
  _mm_prefetch(reinterpret_cast<const char*>(line + kAttnStreamAhead), _MM_HINT_T1);
}

// tile(rows, s, ld) scores NG heads against the NR rows `rows` into
// s[g * ld + i]. The n rows from `k` (`row_stride` apart; `v` holds the same
// positions' V rows) go in tiles of NR; the last rows are padded by
// repeating the last one (each score is independent) and only theirs kept.
template <int NG, int NR, class Tile>
[[gnu::always_inline]] inline void score_tiles(const uint8_t* k, const uint8_t* v, size_t row_stride, int n, float* s,
                                               size_t ld, Tile&& tile) {
  const uint8_t* rows[NR];
  int j = 0;
  for (; j + NR <= n; j += NR) {
    for (size_t off = size_t(j + kAttnPrefetchRows) * row_stride;
         off < size_t(j + kAttnPrefetchRows + NR) * row_stride; off += 64) {
      _mm_prefetch(reinterpret_cast<const char*>(k + off), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(v + off), _MM_HINT_T0);
    }
    for (int i = 0; i < NR; ++i) rows[i] = k + size_t(j + i) * row_stride;
    tile(rows, s + j, ld);
  }
  if (j < n) {
    for (int i = 0; i < NR; ++i) rows[i] = k + size_t(std::min(j + i, n - 1)) * row_stride;
    float tail[NG * NR];
    tile(rows, tail, size_t(NR));
    for (int g = 0; g < NG; ++g)
      for (int i = 0; j + i < n; ++i) s[size_t(g) * ld + size_t(j + i)] = tail[g * NR + i];
  }
}

// A tiled K's n positions from the tile at k, for each pass of up to
// kAttnHeadsPerPass query heads: tile.template operator()<NG>(the pass's q,
// a tile, the pass's scores at the tile's first position). The tile kernels
// prefetch their own lines (prefetch_stream).
template <class Tile>
[[gnu::always_inline]] inline void walk_k_tiles(const void* q, size_t q_stride, int group, const uint8_t* k,
                                                size_t row_stride, int n, float* s, size_t ld, Tile&& tile) {
  for_each_tile<kAttnHeadsPerPass>(size_t(group), [&]<int NG>(size_t g0) {
    for (int j = 0; j < n; j += kKvTileRows)
      tile.template operator()<NG>(static_cast<const uint8_t*>(q) + g0 * q_stride, k + size_t(j) * row_stride,
                                   s + g0 * ld + size_t(j));
  });
}

}  // namespace kvlab::kernels
