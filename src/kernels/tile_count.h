// Kernels that keep a tile of N tokens or heads in registers are templates
// on N; with_tile_count picks the instance for a count known at run time.
#pragma once
#include <cstddef>

namespace kvlab::kernels {

// fn.template operator()<N>() with N = n for 1 <= n < Max, else N = Max
// (the caller takes Max at a time).
template <int Max, class Fn>
inline void with_tile_count(size_t n, Fn&& fn) {
  if constexpr (Max > 1) {
    if (n < size_t(Max)) return with_tile_count<Max - 1>(n, fn);
  }
  fn.template operator()<Max>();
}

// n items in tiles of at most Max: fn.template operator()<N>(first) for
// first = 0, Max, 2*Max, ..., N = Max but in the last tile.
template <int Max, class Fn>
inline void for_each_tile(size_t n, Fn&& fn) {
  for (size_t first = 0; first < n; first += Max)
    with_tile_count<Max>(n - first, [&]<int N>() { fn.template operator()<N>(first); });
}

}  // namespace kvlab::kernels
