// Causal scaled dot-product attention (Vaswani et al. 2017) of the G query
// heads that share one KV head (grouped-query attention), over the cached
// positions of their sequence:
//   out_g = sum_j softmax_j(q_g·k_j * scale) v_j,   j = first .. n_pos-1
// (first = 0 for full causal attention; a sliding window of w positions,
// as in gemma3's local layers, starts at first = max(0, n_pos - w)).
//
// It streams over the KV rows and never forms an n×n matrix. Each K and V row
// is read once for the whole group, not once per query head. The positions
// are cut into fixed chunks of kAttnChunk; each chunk gives a partial result
// (the chunk's max score m, sum of exponentials l and unnormalised output o),
// and partials are merged in chunk order with the log-sum-exp rescaling of
// flash-decoding (Dao et al. 2023):
//   M = max(m1, m2),  L = l1·e^(m1-M) + l2·e^(m2-M),  O = o1·e^(m1-M) + o2·e^(m2-M)
// Chunks can run on different threads (a decode step at a long position) or
// one after another (prefill): the arithmetic is the same either way, so a
// token's attention does not depend on the batch or the thread count.
#pragma once
#include <cstddef>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/aligned_vector.h"
#include "kernels/range_split.h"
#include "kernels/thread_pool.h"
#include "tensor/dtype.h"

namespace kvlab::kernels {

// Positions per partial result. 256 rather than 128: half the partials to
// merge, and one chunk (no split, no merge) up to position 256. With K/V
// on huge pages (kv/cache.h) it is a few percent faster at long positions
// (kvlab_microbench attend_batch/f16/pos:2048, and the step near position
// 2048 in bench/quadratic-trap); on 4 KiB pages it was slower. The simulator keeps a copy
// (lab/cost/cost.h) so as not to depend on the kernels.
constexpr int kAttnChunk = 256;
// The SIMD kernels hold up to this many query heads of a group in registers
// and take a larger group in passes of this many (the last pass narrower).
constexpr int kAttnHeadsPerPass = 4;

// The K and V rows of one KV head of one sequence (f16 and q8_0: rows of tiles,
// kernels/kv_tiles.h, so row_stride is the head's bytes and blocks hold
// whole tiles). Positions are grouped in
// blocks of `block_tokens` consecutive rows (`row_stride` apart); logical
// block b lives at physical block blocks[b], `block_stride` bytes apart
// (the paged KV cache). blocks == nullptr: one contiguous run of rows.
struct KvView {
  const uint8_t* k = nullptr;  // K row 0 of physical block 0, offset to this KV head
  const uint8_t* v = nullptr;  // V row 0 of physical block 0, likewise
  size_t row_stride = 0;       // bytes between positions of a block
  tensor::DType type = tensor::DType::F32;  // f32, f16 or q8_0
  const int32_t* blocks = nullptr;
  int block_tokens = 0;
  size_t block_stride = 0;
};

// A partial result for G heads of head_dim floats, laid out as
// [m_0 .. m_{G-1}, l_0 .. l_{G-1}, o_0 (head_dim), .., o_{G-1}].
inline size_t attn_partial_floats(int group, size_t head_dim) { return size_t(group) * (head_dim + 2); }
// Scratch floats that attend_chunk and attend need (q in K's format and
// one chunk's scores for each head, then two partials for attend).
inline size_t attn_scratch_floats(int group, size_t head_dim) {
  return size_t(group) * (head_dim + size_t(kAttnChunk)) + 2 * attn_partial_floats(group, head_dim);
}
// attn_scratch_floats and attn_partial_floats rounded up to whole cache
// lines: the spacing of attend_batch's per-thread scratch and partial slots.
inline size_t attn_whole_lines(size_t floats) { return (floats + 15) / 16 * 16; }
inline size_t attn_thread_floats(int group, size_t head_dim) { return attn_whole_lines(attn_scratch_floats(group, head_dim)); }
inline size_t attn_slot_floats(int group, size_t head_dim) { return attn_whole_lines(attn_partial_floats(group, head_dim)); }
inline int attn_chunks(int n_pos) { return (n_pos + kAttnChunk - 1) / kAttnChunk; }

// The chunks that hold positions first .. n_pos-1, and the first of them.
inline int attn_first_chunk(int first) { return first / kAttnChunk; }
inline int attn_chunks(int first, int n_pos) { return attn_chunks(n_pos) - attn_first_chunk(first); }

// What a score q·k becomes before the softmax: times `scale`, then, with a
// soft cap c > 0, c·tanh(s / c) (Gemma 2's attention logit soft-capping,
// which keeps every score inside (-c, c)). A plain scale converts to it.
struct ScoreMap {
  float scale;
  float softcap = 0.f;
  ScoreMap(float s, float cap = 0.f) : scale(s), softcap(cap) {}  // NOLINT(google-explicit-constructor)
};

// The G heads of q (head_dim floats each, one after another) in the form
// the KV type's scores read, into the start of `scratch`: once per query
// group, for all of its chunks.
void attend_prepare_q(const float* q, int group, const KvView& kv, size_t head_dim, float* scratch);
// The partial of chunk `chunk` (positions chunk*kAttnChunk .. up to n_pos,
// none before `first`; the chunk must hold at least one of them), with q
// prepared in `scratch` by attend_prepare_q.
void attend_chunk(int group, const KvView& kv, int first, int n_pos, int chunk, size_t head_dim, ScoreMap map,
                  float* scratch, float* partial);
// Folds `partial` into the running `acc` (both laid out as above); an empty
// acc is made by attn_partial_reset.
void attn_partial_reset(float* acc, int group, size_t head_dim);
void attn_partial_merge(float* acc, const float* partial, int group, size_t head_dim);
// out_g = o_g / l_g.
void attn_partial_finish(const float* acc, int group, size_t head_dim, float* out);
// All chunks of positions first .. n_pos-1 in order, merged: out is G heads
// of head_dim floats.
void attend(const float* q, int group, const KvView& kv, int first, int n_pos, size_t head_dim, ScoreMap map,
            float* scratch, float* out);

// One query group's attention in a batch: G heads of q, their KV head's
// rows, the positions they see (first .. n_pos-1), and where the G outputs go.
struct AttnItem {
  const float* q;
  KvView kv;
  int n_pos;
  float* out;
  int first = 0;
};
// Per-thread scratch and chunk partials for attend_batch. Each thread's
// scratch, each partial slot and each item's count of finished chunks
// starts a cache line of its own, so the two threads of a split decode
// step never write to one line (before, one thread's scratch ended in the
// line where the other's prepared q began, the slots of one thread's last
// chunk and the other's first shared a line, and so did the three items'
// counts). Lines written from two cores move between them at every write;
// padded, the step near position 2048 runs a few percent faster and short
// positions are unchanged (kvlab_microbench attend_batch/f16/pos:2048/
// layers:1/threads:2, and bench/quadratic-trap for the engine's step).
struct AttnScratch {
  AlignedVector<float> per_thread;  // threads x attn_thread_floats
  AlignedVector<float> partials;    // chunk partials of a split batch, attn_slot_floats apart
  AttnScratch(int group, size_t head_dim, int n_threads, int n_ctx);
  // Batches with fewer items than this spread each item's chunks over the
  // threads (a decode step of one or two streams), then merge them in order.
  size_t split_below;
  // The first partial slot of each item of a split batch, and how many of
  // its chunks are done, kept here so a decode step allocates nothing.
  std::vector<size_t> first_partial;
  struct alignas(64) ChunksDone {
    std::atomic<uint32_t> n{0};
  };
  std::unique_ptr<ChunksDone[]> chunks_done;
  RangeSplit split;  // a split batch's chunks still to do, per thread
};
// All items on the pool, with the same arithmetic whether an item's chunks
// run on one thread or many.
void attend_batch(std::span<const AttnItem> items, int group, size_t head_dim, ScoreMap map, ThreadPool& pool,
                  AttnScratch& scratch);

// The per-ISA pieces of a chunk, for one KV type:
//  prepare_q: q in the form `scores` reads (f16 K: q rounded to f16, as
//             the matmuls pair activations with weights), head_dim*4 bytes;
//  scores:    s[g*ld + j] = scale * q_g·k_j for the n rows from `k`; `v`
//             holds the same positions' V rows (same stride), which it may
//             prefetch as it goes, for accumulate to find them cached. For
//             a tiled K (kernels/kv_tiles.h) `k` is a tile and n a multiple
//             of kKvTileRows, the tiles kKvTileRows * row_stride apart;
//  max:       the largest of n scores (exact, so any order gives it);
//  exp_sum:   x_i = e^(x_i - m), returns the sum;
//  accumulate: o_g += sum_j p[g*ld + j] * v_j; for a tiled V, from the tile
//             at v, n a multiple of kKvTileRows, rows with p = 0 left out
//             (they may hold anything).
struct AttnKernel {
  void (*prepare_q)(const float* q, size_t head_dim, void* out);
  void (*scores)(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t* v, size_t row_stride,
                 int n, size_t head_dim, float scale, float* s, size_t ld);
  float (*max)(const float* x, size_t n);
  float (*exp_sum)(float* x, size_t n, float m);
  void (*accumulate)(const float* p, size_t ld, int group, const uint8_t* v, size_t row_stride, int n,
                     size_t head_dim, float* o);
};
// The active ISA's kernel for this KV type and head size (SIMD pieces need
// head_dim to be a multiple of 16); throws kvlab::Error for a KV type
// without one.
const AttnKernel& attn_kernel(tensor::DType kv_type, size_t head_dim);

// Per-ISA tables. A nullptr member falls back to the generic piece: q in the
// K type's activation format and the active ISA's dot product for scores,
// scalar code for the rest. With the scalar ISA active, the generic kernel is
// the reference the SIMD ones are tested against.
namespace avx2 {
AttnKernel find_attn(tensor::DType t);
// o_d = o_d * a + po_d * b for d < n, as separate multiplies and an add (no
// fused multiply-add), so the bits are the scalar merge's
// (attn_partial_merge); 8 at a time, the rest one by one.
void rescale_add(float* o, const float* po, float a, float b, size_t n);
}  // namespace avx2
namespace avx512 { AttnKernel find_attn(tensor::DType t); }

}  // namespace kvlab::kernels
