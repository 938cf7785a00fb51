// The prefetch of the dot products that stream one float weight row (f32,
// f16, bf16) at a time: decode's rows4 is four calls of dot, and a float
// copy of a model is read once per token, from DRAM (270 MB for the default
// model in f16). A row's one multiply-add chain (the order every path
// shares, so a token's result does not depend on its batch) waits on the
// instruction's latency, and the hardware prefetchers alone then kept too
// few lines in flight: on the Emerald Rapids VM, tg64 on the f16 copy read
// 14-18 GB/s where the probe reads 34 from DRAM. Asking for each line of
// the row this far ahead, into L1, at every step of the loop (f16 copy,
// AVX-512, 3 alternating rounds): 2 KiB 24-25 GB/s, 4 KiB 25-28, 8 KiB
// 25-27; the same lines asked for in a burst before each rows4 call, 20-22.
// At 4 KiB, tg64 in 2 alternating rounds (docs/performance-log.md,
// 2026-12-06): f32 23-25 -> 28, f16 15-16 -> 23-27, bf16 21-22 -> 24-29 GB/s
// (AVX-512); f32 24 -> 28-29, f16 14-15 -> 22-23 (AVX2). Past a row's end the
// lines are the next rows' (a thread's rows lie one after another) or the
// next matrix's: harmless.
#pragma once
#include <immintrin.h>

#include <cstddef>

namespace kvlab::kernels {

inline constexpr size_t kRowStreamAhead = 4096;

[[gnu::always_inline]] inline void prefetch_row_ahead(const void* at) {
  _mm_prefetch(static_cast<const char*>(at) + kRowStreamAhead, _MM_HINT_T0);
}

}  // namespace kvlab::kernels
