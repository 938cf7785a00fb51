#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <memory>

#include "kernels/dot.h"
#include "kernels/rows8.h"

namespace kvlab::kernels {
namespace {
// Prefill: tiles of kRowTile weight rows x kTokenTile tokens, handed out
// dynamically. A weight tile (16 rows of a 576..1536-wide matrix: 6..30 KiB in
// Q4) stays in L1 while it meets up to 64 activation rows that stay in L2.
constexpr size_t kRowTile = 16;  // a multiple of kRows8
constexpr size_t kTokenTile = 64;

// Y[t0..t1) for weight rows [r0, r1).
void multiply_rows(const DotKernel& k, const WeightMatrix& w, const uint8_t* act, size_t act_bytes, const float* scales,
                   size_t sc_floats, size_t r0, size_t r1, size_t t0, size_t t1, float* y) {
  if (w.layout == Layout::Rows8) {  // groups of 8 rows (kernels/rows8.h), up to 4 tokens per pass
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
}

// Decode and small batches (one token tile) read every weight once, from
// DRAM. Each thread owns one contiguous range of rows, so its reads are one
// sequential stream the prefetchers can follow (16-row tiles handed out
// dynamically interleave the threads' streams and leave each core a fraction
// of the bandwidth: default model, 2 threads, tg128 ~120 -> ~180 tok/s). A
// thread works through its range front to back in shrinking chunks; one that
// finishes early takes chunks from the back of the range with the most rows
// left, so a core that was descheduled or slowed (a shared VM) does not hold
// up the step while the other waits at the barrier.
//
// Ranges count units of kRows8 rows (the last one may be short); each is one
// 64-bit word, front << 32 | back, claimed by CAS.
constexpr size_t kUnitRows = kRows8;

bool claim(std::atomic<uint64_t>& span, bool from_back, size_t divisor, size_t& a, size_t& b) {
  uint64_t s = span.load(std::memory_order_relaxed);
  for (;;) {
    const size_t front = size_t(s >> 32), back = size_t(uint32_t(s));
    if (front >= back) return false;
    const size_t n = std::max<size_t>(2, (back - front) / divisor);
    const size_t take = std::min(n, back - front);
    const uint64_t next = from_back ? (uint64_t(front) << 32 | (back - take)) : (uint64_t(front + take) << 32 | back);
    if (span.compare_exchange_weak(s, next, std::memory_order_relaxed)) {
      a = from_back ? back - take : front;
      b = from_back ? back : front + take;
      return true;
    }
  }
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

  if (n_tokens > kTokenTile) {
    const size_t row_tiles = (w.rows + kRowTile - 1) / kRowTile;
    const size_t token_tiles = (n_tokens + kTokenTile - 1) / kTokenTile;
    pool.run(row_tiles * token_tiles, [&](size_t task, int) {
      const size_t r0 = (task % row_tiles) * kRowTile, r1 = std::min(w.rows, r0 + kRowTile);
      const size_t t0 = (task / row_tiles) * kTokenTile, t1 = std::min(n_tokens, t0 + kTokenTile);
      multiply_rows(k, w, act, act_bytes, scales, sc_floats, r0, r1, t0, t1, y);
    });
    return;
  }

  const size_t n_ranges = size_t(pool.size()), units = (w.rows + kUnitRows - 1) / kUnitRows;
  if (scratch.n_spans < n_ranges) {
    scratch.spans = std::make_unique<MatmulScratch::Span[]>(n_ranges);
    scratch.n_spans = n_ranges;
  }
  MatmulScratch::Span* spans = scratch.spans.get();
  for (size_t i = 0; i < n_ranges; ++i)
    spans[i].v.store(uint64_t(units * i / n_ranges) << 32 | (units * (i + 1) / n_ranges), std::memory_order_relaxed);
  auto run_units = [&](size_t a, size_t b) {
    multiply_rows(k, w, act, act_bytes, scales, sc_floats, a * kUnitRows, std::min(w.rows, b * kUnitRows), 0,
                  n_tokens, y);
  };
  pool.run(n_ranges, [&](size_t own, int) {
    size_t a, b;
    // Own range front to back, a third of what is left at a time: few claims,
    // small ones at the end where stealing may start.
    while (claim(spans[own].v, false, 3, a, b)) run_units(a, b);
    for (;;) {  // then half of what is left of the fullest other range, from its back
      size_t victim = n_ranges, most = 0;
      for (size_t i = 0; i < n_ranges; ++i) {
        const uint64_t s = spans[i].v.load(std::memory_order_relaxed);
        const size_t left = size_t(uint32_t(s)) - std::min(size_t(uint32_t(s)), size_t(s >> 32));
        if (left > most) most = left, victim = i;
      }
      if (victim == n_ranges) return;
      if (claim(spans[victim].v, true, 2, a, b)) run_units(a, b);
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
