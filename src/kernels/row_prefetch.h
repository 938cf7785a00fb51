// The prefetch of the dot products that stream one float weight row (f32,
// f16, bf16) at a time: decode's rows4 is four calls of dot, and a float
// copy of a model is read once per token, from DRAM (270 MB for the default
// model in f16). A row's one multiply-add chain (the order every path
// shares, so a token's result does not depend on its batch) waits on the
// instruction's latency, and the hardware prefetchers alone then kept too
// few lines in flight: decode on an f16 copy read about half the probe's
// DRAM rate. Asking for each line of the row this far ahead, into L1, at
// every step of the loop brings it to about 0.7-0.8 of it; 2 KiB ahead is a
// little slower, 8 KiB no faster, and the same lines asked for in a burst
// before each rows4 call slower than either. bench/bytes-per-weight measures
// it (tg64 GB/s per float copy).
// Past a row's end the lines are the next rows' (a thread's rows lie one
// after another) or the next matrix's: harmless.
#pragma once
#include <immintrin.h>

#include <cstddef>

namespace kvlab::kernels {

inline constexpr size_t kRowStreamAhead = 4096;

[[gnu::always_inline]] inline void prefetch_row_ahead(const void* at) {
  _mm_prefetch(static_cast<const char*>(at) + kRowStreamAhead, _MM_HINT_T0);
}

}  // namespace kvlab::kernels
