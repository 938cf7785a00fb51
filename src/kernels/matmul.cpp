#include "kernels/matmul.h"

#include <algorithm>
#include <string>

#include "common/error.h"
#include "kernels/dot.h"
#include "kernels/rows8.h"

namespace kvlab::kernels {
namespace {
// Prefill: tiles of kRowTile weight rows x kTokenTile tokens, handed out
// dynamically. A weight tile (16 rows of a 576..1536-wide matrix: 6..30 KiB in
// Q4) stays in L1 while it meets up to 64 activation rows that stay in L2.
constexpr size_t kRowTile = 16;  // a multiple of kRows8
constexpr size_t kTokenTile = 64;

// Rows-of-8 matrices against this many tokens or more go two groups per
// kernel call (DotKernel::rows16: one activation broadcast for 16 rows),
// fewer one group per call. Pairs make pp64 and pp512 about 1.2x as fast;
// from 1 token they made decode slower (about 0.85x): a pass of a few
// tokens streams its weights from DRAM, and two streams per thread (each
// half its range) feed it worse than one. From 8 tokens the pass's
// arithmetic outlasts its reads (on Zen 4 the rows-of-8 kernels' int8 rate
// is ~150 GMAC/s per core, 8 tokens of the default model ~1.07 GMAC), and
// the halved broadcasts win: in cache, 8 tokens of q4_1 1536x576 52 -> 45
// us; a batched decode step of 8 sequences on the default model 10.2 -> 9.4
// ms (1 thread, CPU time, best of 3 alternating runs; at 4 tokens pairs
// left the step as it was). bench/pass-cost measures it end to end.
constexpr size_t kPairTokens = 8;

// Float tiles (DotKernel::float_tile) from this many tokens on; fewer go 4
// tokens per weight row pass (dot4). Below it a pass streams its weights
// from DRAM, and a tile's 4 rows side by side read them slower than dot4's
// one row: from 2 tokens, tiles made pp4 about 0.7x as fast; from pp12 on
// they win (bench/alternate-bench on the f16 and f32 copies of a model).
constexpr size_t kFloatTileTokens = 12;

// A matmul's converted input, per token row.
struct Acts {
  const uint8_t* bytes;   // in the weights' activation format, row_bytes each
  size_t row_bytes;
  const float* scales;    // rows-of-8 matrices: kernels/rows8.h, scale_floats each
  size_t scale_floats;
  const uint8_t* tile_rows;  // float tiles: the rows in the kernel's tile_act format, or nullptr
  size_t tile_row_bytes;
};

// Y[t0..t1) for weight rows [r0, r1).
void multiply_rows(const DotKernel& k, const WeightMatrix& w, const Acts& a, size_t r0, size_t r1, size_t t0, size_t t1,
                   float* y) {
  const uint8_t* act = a.bytes;
  const size_t act_bytes = a.row_bytes, sc_floats = a.scale_floats;
  const float* scales = a.scales;
  if (w.layout == Layout::Rows8) {  // groups of 8 rows (kernels/rows8.h), up to k.rows8_tokens per pass
    auto tokens = [&](auto&& call) {
      for (size_t t = t0; t < t1; t += k.rows8_tokens) call(t, std::min(k.rows8_tokens, t1 - t));
    };
    // From kPairTokens tokens on, group i with group i + half where the
    // kernel set pairs them: two sequential streams of half the range each,
    // with the same bits as rows8.
    const size_t groups = (r1 - r0) / kRows8, half = k.rows16 && t1 - t0 >= kPairTokens ? groups / 2 : 0;
    for (size_t i = 0; i < half; ++i) {  // rows16 takes all the tokens, in passes of its own size
      const size_t r = r0 + i * kRows8;
      k.rows16(w.data + r * w.row_bytes, half * kRows8 * w.row_bytes, act + t0 * act_bytes, act_bytes,
               scales + t0 * sc_floats, sc_floats, t1 - t0, w.cols, y + t0 * w.rows + r, half * kRows8, w.rows);
    }
    for (size_t r = r0 + 2 * half * kRows8; r < r1; r += kRows8)
      tokens([&](size_t t, size_t nt) {
        k.rows8(w.data + r * w.row_bytes, act + t * act_bytes, act_bytes, scales + t * sc_floats, sc_floats, nt,
                w.cols, y + t * w.rows + r, w.rows);
      });
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
  if (k.float_tile && a.tile_rows) {
    k.float_tile(w.data + r0 * w.row_bytes, w.row_bytes, a.tile_rows + t0 * a.tile_row_bytes, a.tile_row_bytes, r1 - r0,
                 t1 - t0, w.cols, y + t0 * w.rows + r0, w.rows);
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
// DRAM: their rows go out in units of 8 (the last may be short) as ranges
// per thread (kernels/range_split.h).
constexpr size_t kUnitRows = kRows8;

// One call for matrices that read the same input and pair it with the same
// activation format: the input is converted once, and one job covers all of
// their rows, so the threads meet at one barrier instead of one per matrix.
void matmul_same_format(std::span<const MatmulOut> outs, const float* x, size_t n_tokens, ThreadPool& pool,
                        MatmulScratch& scratch) {
  const size_t cols = outs[0].w->cols;
  const DotKernel& k0 = dot_kernel(outs[0].w->dtype);
  const size_t act_bytes = act_row_bytes(k0.act, cols);
  if (scratch.act.size() < act_bytes * n_tokens) scratch.act.resize(act_bytes * n_tokens);
  uint8_t* act = scratch.act.data();

  const bool any_rows8 = std::any_of(outs.begin(), outs.end(), [](const MatmulOut& o) { return o.w->layout == Layout::Rows8; });
  const size_t sc_floats = any_rows8 ? rows8_scale_floats(cols) : 0;
  if (scratch.act_scales.size() < sc_floats * n_tokens) scratch.act_scales.resize(sc_floats * n_tokens);
  float* scales = scratch.act_scales.data();
  // Float tiles read the converted rows, or those widened back to f32
  // (exact) where the tile takes f32: the numbers dot multiplies either way.
  const bool tiles = k0.float_tile && n_tokens >= kFloatTileTokens;
  const bool widen = tiles && k0.tile_act != k0.act;
  if (widen && scratch.widened.size() < cols * n_tokens) scratch.widened.resize(cols * n_tokens);
  const tensor::DTypeInfo* widen_from =
      widen ? &tensor::dtype_info(k0.act == ActFormat::BF16 ? tensor::DType::BF16 : tensor::DType::F16) : nullptr;
  pool.for_each(n_tokens, [&](size_t t, int) {
    k0.quantize_act(x + t * cols, act + t * act_bytes, cols);
    if (any_rows8) rows8_act_scales(k0.act, act + t * act_bytes, cols, scales + t * sc_floats);
    if (widen_from) widen_from->dequantize(act + t * act_bytes, &scratch.widened[t * cols], cols);
  });
  const uint8_t* tile_rows = !tiles ? nullptr : widen ? reinterpret_cast<const uint8_t*>(scratch.widened.data()) : act;
  const Acts acts{act, act_bytes, scales, sc_floats, tile_rows, widen ? cols * sizeof(float) : act_bytes};

  // Rows [r0, r1) of the matrices' rows laid end to end, split at the
  // matrices' boundaries (each a multiple of kUnitRows rows in this count).
  // Each matrix's kernel is looked up once here, not per tile or chunk.
  size_t starts[kMaxShared + 1] = {0};
  const DotKernel* kernels[kMaxShared];
  for (size_t m = 0; m < outs.size(); ++m) {
    starts[m + 1] = starts[m] + (outs[m].w->rows + kUnitRows - 1) / kUnitRows * kUnitRows;
    kernels[m] = &dot_kernel(outs[m].w->dtype);
    // Re-laid out under a kernel set that has the rows-of-8 kernel, run under
    // one that lacks it (the ISA changed after loading: only tests do that).
    if (outs[m].w->layout == Layout::Rows8 && kernels[m]->rows8 == nullptr)
      throw Error(std::string("matmul: a rows-of-8 ") + std::string(tensor::dtype_info(outs[m].w->dtype).name) +
                  " matrix, and no rows-of-8 kernel for it at this ISA");
  }
  auto run_rows = [&](size_t r0, size_t r1, size_t t0, size_t t1) {
    for (size_t m = 0; m < outs.size(); ++m) {
      const size_t a = std::max(r0, starts[m]), b = std::min(r1, starts[m + 1]);
      if (a >= b) continue;
      const WeightMatrix& w = *outs[m].w;
      multiply_rows(*kernels[m], w, acts, a - starts[m], std::min(w.rows, b - starts[m]), t0, t1, outs[m].y);
    }
  };
  const size_t total_rows = starts[outs.size()];

  if (n_tokens > kTokenTile) {
    const size_t row_tiles = (total_rows + kRowTile - 1) / kRowTile;
    const size_t token_tiles = (n_tokens + kTokenTile - 1) / kTokenTile;
    pool.run(row_tiles * token_tiles, [&](size_t task, int) {
      const size_t r0 = (task % row_tiles) * kRowTile, t0 = (task / row_tiles) * kTokenTile;
      run_rows(r0, std::min(total_rows, r0 + kRowTile), t0, std::min(n_tokens, t0 + kTokenTile));
    });
    return;
  }

  scratch.split.reset(total_rows / kUnitRows, size_t(pool.size()), 2);
  pool.run(size_t(pool.size()), [&](size_t own, int) {
    scratch.split.work(own, [&](size_t a, size_t b) { run_rows(a * kUnitRows, b * kUnitRows, 0, n_tokens); });
  });
}

}  // namespace

void matmul(std::span<const MatmulOut> outs, const float* x, size_t n_tokens, ThreadPool& pool, MatmulScratch& scratch) {
  if (outs.size() > kMaxShared) throw Error("matmul: more than " + std::to_string(kMaxShared) + " matrices share an input");
  for (const MatmulOut& o : outs)
    if (o.w->cols != outs[0].w->cols) throw Error("matmul: matrices sharing an input differ in width");
  // Matrices whose dtypes pair with different activation formats (a mixed
  // Q4_K_M file: Q8_K for the K-quants, Q8_0 for Q5_0) go in separate calls.
  MatmulOut group[kMaxShared];
  bool done[kMaxShared] = {};
  for (size_t i = 0; i < outs.size(); ++i) {
    if (done[i]) continue;
    const ActFormat f = dot_kernel(outs[i].w->dtype).act;
    size_t n = 0;
    for (size_t j = i; j < outs.size(); ++j)
      if (!done[j] && dot_kernel(outs[j].w->dtype).act == f) group[n++] = outs[j], done[j] = true;
    matmul_same_format({group, n}, x, n_tokens, pool, scratch);
  }
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
