#include "kernels/matmul.h"

#include <algorithm>

#include "kernels/dot.h"

namespace kvlab::kernels {
namespace {
// Work is split into tiles of kRowTile weight rows x kTokenTile tokens. A
// weight tile (16 rows of a 576..1536-wide matrix: 6..30 KiB in Q4) stays in L1
// while it meets up to 64 activation rows that stay in L2.
constexpr size_t kRowTile = 16;
constexpr size_t kTokenTile = 64;
}  // namespace

void matmul(const WeightMatrix& w, const float* x, size_t n_tokens, float* y, ThreadPool& pool,
            MatmulScratch& scratch) {
  const DotKernel& k = dot_kernel(w.dtype);
  const size_t act_bytes = act_row_bytes(k.act, w.cols);
  if (scratch.act.size() < act_bytes * n_tokens) scratch.act.resize(act_bytes * n_tokens);
  uint8_t* act = scratch.act.data();

  pool.run(n_tokens, [&](size_t t, int) { k.quantize_act(x + t * w.cols, act + t * act_bytes, w.cols); });

  const size_t row_tiles = (w.rows + kRowTile - 1) / kRowTile;
  const size_t token_tiles = (n_tokens + kTokenTile - 1) / kTokenTile;
  pool.run(row_tiles * token_tiles, [&](size_t task, int) {
    const size_t r0 = (task % row_tiles) * kRowTile, r1 = std::min(w.rows, r0 + kRowTile);
    const size_t t0 = (task / row_tiles) * kTokenTile, t1 = std::min(n_tokens, t0 + kTokenTile);
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
  const auto& info = tensor::dtype_info(w.dtype);
  std::vector<float> row(w.cols);
  for (size_t r = 0; r < w.rows; ++r) {
    info.dequantize(w.data + r * w.row_bytes, row.data(), w.cols);
    for (size_t t = 0; t < n_tokens; ++t) {
      double s = 0;
      for (size_t c = 0; c < w.cols; ++c) s += double(row[c]) * double(x[t * w.cols + c]);
      y[t * w.rows + r] = float(s);
    }
  }
}

}  // namespace kvlab::kernels
