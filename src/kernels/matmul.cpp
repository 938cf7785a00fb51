#include "kernels/matmul.h"

#include <algorithm>

#include "kernels/dot.h"
#include "kernels/rows8.h"

namespace kvlab::kernels {
namespace {
// Prefill: tiles of kRowTile weight rows x kTokenTile tokens, handed out
// dynamically. A weight tile (16 rows of a 576..1536-wide matrix: 6..30 KiB in
// Q4) stays in L1 while it meets up to 64 activation rows that stay in L2.
constexpr size_t kRowTile = 16;  // a multiple of kRows8
constexpr size_t kTokenTile = 64;

struct Tiling {
  size_t row_tile, row_tiles, token_tiles;
};

// Decode and small batches (one token tile) read every weight once, from
// DRAM. Then each thread gets one contiguous range of rows, so its reads are
// one sequential stream the prefetchers can follow; 16-row tiles handed out
// dynamically interleave the threads' streams and leave each core a fraction
// of the bandwidth (default model, 2 threads, alternating runs: tg128 ~120 ->
// ~180 tok/s; two ranges per thread ~157).
Tiling tiling(size_t rows, size_t n_tokens, int threads) {
  const size_t token_tiles = (n_tokens + kTokenTile - 1) / kTokenTile;
  size_t row_tile = kRowTile;
  if (token_tiles == 1) {
    const size_t per_thread = (rows + size_t(threads) - 1) / size_t(threads);
    row_tile = std::max(kRowTile, (per_thread + kRows8 - 1) / kRows8 * kRows8);
  }
  return {row_tile, (rows + row_tile - 1) / row_tile, token_tiles};
}

}  // namespace

void matmul(const WeightMatrix& w, const float* x, size_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  const DotKernel& k = dot_kernel(w.dtype);
  const size_t act_bytes = act_row_bytes(k.act, w.cols);
  if (scratch.act.size() < act_bytes * n_tokens) scratch.act.resize(act_bytes * n_tokens);
  uint8_t* act = scratch.act.data();

  const bool rows8 = w.layout == Layout::Rows8;
  const size_t sc_floats = rows8 ? rows8_scale_floats(w.cols) : 0;
  if (scratch.act_scales.size() < sc_floats * n_tokens) scratch.act_scales.resize(sc_floats * n_tokens);
  float* scales = scratch.act_scales.data();
  pool.run(n_tokens, [&](size_t t, int) {
    k.quantize_act(x + t * w.cols, act + t * act_bytes, w.cols);
    if (rows8) rows8_act_scales(k.act, act + t * act_bytes, w.cols, scales + t * sc_floats);
  });

  const Tiling tl = tiling(w.rows, n_tokens, pool.size());
  pool.run(tl.row_tiles * tl.token_tiles, [&](size_t task, int) {
    const size_t r0 = (task % tl.row_tiles) * tl.row_tile, r1 = std::min(w.rows, r0 + tl.row_tile);
    const size_t t0 = (task / tl.row_tiles) * kTokenTile, t1 = std::min(n_tokens, t0 + kTokenTile);
    if (rows8) {  // groups of 8 rows (kernels/rows8.h), up to 4 tokens per pass
      for (size_t r = r0; r < r1; r += kRows8)
        for (size_t t = t0; t < t1; t += 4)
          k.rows8(w.data + r * w.row_bytes, act + t * act_bytes, act_bytes, scales + t * sc_floats, sc_floats,
                  std::min<size_t>(4, t1 - t), w.cols, y + t * w.rows + r, w.rows);
      return;
    }
    float out[4];
    if (t1 - t0 == 1) {  // one token (decode): 4 weight rows at a time
      size_t r = r0;
      for (; r + 4 <= r1; r += 4) {
        k.rows4(w.data + r * w.row_bytes, w.row_bytes, act + t0 * act_bytes, w.cols, out);
        for (size_t i = 0; i < 4; ++i) y[t0 * w.rows + r + i] = out[i];
      }
      for (; r < r1; ++r) y[t0 * w.rows + r] = k.dot(w.data + r * w.row_bytes, act + t0 * act_bytes, w.cols);
      return;
    }
    for (size_t r = r0; r < r1; ++r) {  // several tokens (prefill): 4 tokens per weight row pass
      const uint8_t* wrow = w.data + r * w.row_bytes;
      size_t t = t0;
      for (; t + 4 <= t1; t += 4) {
        k.dot4(wrow, act + t * act_bytes, act_bytes, w.cols, out);
        for (size_t i = 0; i < 4; ++i) y[(t + i) * w.rows + r] = out[i];
      }
      for (; t < t1; ++t) y[t * w.rows + r] = k.dot(wrow, act + t * act_bytes, w.cols);
    }
  });
}

void matmul_reference(const WeightMatrix& w, const float* x, size_t n_tokens, float* y) {
  std::vector<float> row(w.cols);
  for (size_t r = 0; r < w.rows; ++r) {
    dequantize_row(w, r, row.data());
    for (size_t t = 0; t < n_tokens; ++t) {
      double s = 0;
      for (size_t c = 0; c < w.cols; ++c) s += double(row[c]) * double(x[t * w.cols + c]);
      y[t * w.rows + r] = float(s);
    }
  }
}

}  // namespace kvlab::kernels
