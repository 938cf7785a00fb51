// The loop over a float prefill tile's token and row groups (dot.h's
// FloatTile), shared by the AVX2 and AVX-512 files that implement one.
// Templates only: each file's instances are its own, since their Tile is a
// lambda of that file.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>

#include "kernels/tile_count.h"

namespace kvlab::kernels {

// The tokens in groups of up to MaxTokens, each against the rows in groups
// of RowGroup: tile.template operator()<NT>(rows, tokens, nr, y) with
// RowGroup row pointers (past row nr - 1 they repeat the last row, whose
// results the tile does not store), the group's NT activation rows, and
// where its results go. A token group's activations are read once per row
// group, from L1 where they fit (6 f32 rows of a 576-wide matrix are 13.5
// KiB; of the 1536-wide down matrix, 36 KiB, over Zen 4's 32), and the rows
// come from L2, fewer bytes per step than the activations would be (with
// the row groups outside, an earlier f16 tile ran pp512 on an f16 copy
// about 2% slower; bench/bytes-per-weight measures prefill per copy).
template <class Elem, class Act, size_t RowGroup, int MaxTokens, class Tile>
void for_each_float_tile(const void* w, size_t w_stride, const void* act, size_t act_stride, size_t n_rows,
                         size_t n_tokens, float* y, size_t y_stride, Tile&& tile) {
  const size_t ld = act_stride / sizeof(Act);
  for (size_t t0 = 0; t0 < n_tokens; t0 += MaxTokens)
    with_tile_count<MaxTokens>(n_tokens - t0, [&]<int NT>() {
      std::array<const Act*, NT> tokens;
      for (size_t t = 0; t < size_t(NT); ++t) tokens[t] = static_cast<const Act*>(act) + (t0 + t) * ld;
      for (size_t r0 = 0; r0 < n_rows; r0 += RowGroup) {
        const size_t nr = std::min(RowGroup, n_rows - r0);
        const Elem* rows[RowGroup];
        for (size_t r = 0; r < RowGroup; ++r)
          rows[r] = reinterpret_cast<const Elem*>(static_cast<const uint8_t*>(w) + (r0 + std::min(r, nr - 1)) * w_stride);
        tile.template operator()<NT>(rows, tokens.data(), nr, y + t0 * y_stride + r0);
      }
    });
}

}  // namespace kvlab::kernels
