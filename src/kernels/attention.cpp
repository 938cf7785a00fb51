#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "common/error.h"
#include "kernels/dot.h"
#include "kernels/kv_tiles.h"

namespace kvlab::kernels {

namespace {

using tensor::DType;

// The largest head_dim the generic accumulate dequantizes on the stack.
constexpr size_t kMaxHeadDim = 1024;

// Generic pieces, one instance per KV type (see attention.h).
template <DType T>
void prepare_q_generic(const float* q, size_t head_dim, void* out) {
  dot_kernel(T).quantize_act(q, out, head_dim);
}

template <DType T>
void scores_generic(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t*, size_t row_stride,
                    int n, size_t head_dim, float scale, float* s, size_t ld) {
  const DotKernel& dk = dot_kernel(T);
  for (int g = 0; g < group; ++g) {
    const void* qg = static_cast<const uint8_t*>(q) + size_t(g) * q_stride;
    for (int j = 0; j < n; ++j) s[size_t(g) * ld + size_t(j)] = dk.dot(k + size_t(j) * row_stride, qg, head_dim) * scale;
  }
}

// A tiled K (kv_tiles.h): n a multiple of kKvTileRows from the tile at k,
// tiles kKvTileRows * row_stride apart. Each slot is gathered back into its
// row and scored by the same dot product as a row.
template <DType T>
void scores_tiled_generic(const void* q, size_t q_stride, int group, const uint8_t* k, const uint8_t*,
                          size_t row_stride, int n, size_t head_dim, float scale, float* s, size_t ld) {
  const DotKernel& dk = dot_kernel(T);
  alignas(64) uint8_t row[kMaxHeadDim * 2];  // f16: 2 bytes an element; q8_0: 34 per 32
  for (int j = 0; j < n; ++j) {
    tile_get(T, true, k + size_t(j / kKvTileRows) * kKvTileRows * row_stride, j % kKvTileRows, row, head_dim);
    for (int g = 0; g < group; ++g)
      s[size_t(g) * ld + size_t(j)] = dk.dot(row, static_cast<const uint8_t*>(q) + size_t(g) * q_stride, head_dim) * scale;
  }
}

float max_generic(const float* x, size_t n) { return *std::max_element(x, x + n); }

float exp_sum_generic(float* x, size_t n, float m) {
  float sum = 0.f;
  for (size_t i = 0; i < n; ++i) sum += (x[i] = std::exp(x[i] - m));
  return sum;
}

template <DType T>
void accumulate_generic(const float* p, size_t ld, int group, const uint8_t* v, size_t row_stride, int n,
                        size_t head_dim, float* o) {
  const tensor::DTypeInfo& info = tensor::dtype_info(T);
  float row[kMaxHeadDim];
  for (int j = 0; j < n; ++j) {
    info.dequantize(v + size_t(j) * row_stride, row, head_dim);
    for (int g = 0; g < group; ++g) {
      const float pj = p[size_t(g) * ld + size_t(j)];
      float* og = o + size_t(g) * head_dim;
      for (size_t d = 0; d < head_dim; ++d) og[d] += pj * row[d];
    }
  }
}

// A tiled V (kv_tiles.h): n a multiple of kKvTileRows from the tile at v.
// A zero probability skips its row (the positions of a tile outside the
// range attended have p = 0 and may hold anything).
void accumulate_tiled_generic(const float* p, size_t ld, int group, const uint8_t* v, size_t row_stride, int n,
                              size_t head_dim, float* o) {
  const tensor::DTypeInfo& info = tensor::dtype_info(DType::Q8_0);
  tensor::BlockQ8_0 blocks[kMaxHeadDim / tensor::kQK];
  float row[kMaxHeadDim];
  for (int j = 0; j < n; ++j) {
    tile_get(DType::Q8_0, false, v + size_t(j / kKvTileRows) * kKvTileRows * row_stride, j % kKvTileRows, blocks,
             head_dim);
    info.dequantize(blocks, row, head_dim);
    for (int g = 0; g < group; ++g) {
      const float pj = p[size_t(g) * ld + size_t(j)];
      if (pj == 0.f) continue;
      float* og = o + size_t(g) * head_dim;
      for (size_t d = 0; d < head_dim; ++d) og[d] += pj * row[d];
    }
  }
}

template <DType T>
AttnKernel generic_kernel() {
  AttnKernel k{prepare_q_generic<T>, scores_generic<T>, max_generic, exp_sum_generic, accumulate_generic<T>};
  if constexpr (k_tiled(T)) k.scores = scores_tiled_generic<T>;
  if constexpr (v_tiled(T)) k.accumulate = accumulate_tiled_generic;
  return k;
}

AttnKernel with_fallbacks(AttnKernel k, const AttnKernel& generic) {
  if (!k.prepare_q) k.prepare_q = generic.prepare_q;
  if (!k.scores) k.scores = generic.scores;
  if (!k.max) k.max = generic.max;
  if (!k.exp_sum) k.exp_sum = generic.exp_sum;
  if (!k.accumulate) k.accumulate = generic.accumulate;
  return k;
}

// The generic kernel, or the ISA's with generic fallbacks, per KV type.
struct AttnTable {
  AttnKernel f32, f16, q8_0;
  explicit AttnTable(Isa isa) : f32(pick<DType::F32>(isa)), f16(pick<DType::F16>(isa)), q8_0(pick<DType::Q8_0>(isa)) {}
  template <DType T>
  static AttnKernel pick(Isa isa) {
    if (isa >= Isa::Avx512) return with_fallbacks(avx512::find_attn(T), generic_kernel<T>());
    if (isa == Isa::Avx2) return with_fallbacks(avx2::find_attn(T), generic_kernel<T>());
    return generic_kernel<T>();
  }
};

// The first row of position `pos` in a paged or contiguous view.
const uint8_t* row_at(const uint8_t* base, const KvView& kv, int pos) {
  if (!kv.blocks) return base + size_t(pos) * kv.row_stride;
  return base + size_t(kv.blocks[pos / kv.block_tokens]) * kv.block_stride +
         size_t(pos % kv.block_tokens) * kv.row_stride;
}

// Calls fn(first position, row count, first row) for the runs of rows that
// lie one after another in memory within [p0, p1): a block joins the run of
// the one before it when it is the next physical block (always, for a
// sequence that owns its blocks in order), so the kernels see long runs
// rather than 16-row pieces with a partial tile at each end.
template <class Fn>
void for_each_run(const uint8_t* base, const KvView& kv, int p0, int p1, Fn&& fn) {
  const bool contiguous_blocks = kv.block_stride == size_t(kv.block_tokens) * kv.row_stride;
  for (int j = p0; j < p1;) {
    int end = p1;
    if (kv.blocks) {
      int b = j / kv.block_tokens;
      while ((b + 1) * kv.block_tokens < p1 && contiguous_blocks && kv.blocks[b + 1] == kv.blocks[b] + 1) ++b;
      end = std::min(p1, (b + 1) * kv.block_tokens);
    }
    fn(j, end - j, row_at(base, kv, j));
    j = end;
  }
}

}  // namespace

const AttnKernel& attn_kernel(DType kv_type, size_t head_dim) {
  static const AttnTable generic_table(Isa::Scalar), avx2_table(Isa::Avx2), avx512_table(Isa::Avx512);
  const Isa isa = head_dim % 16 == 0 ? active_isa() : Isa::Scalar;
  const AttnTable& t = isa >= Isa::Avx512 ? avx512_table : isa == Isa::Avx2 ? avx2_table : generic_table;
  if (kv_type == DType::F32) return t.f32;
  if (kv_type == DType::F16) return t.f16;
  if (kv_type == DType::Q8_0) return t.q8_0;
  throw Error("no attention kernel for KV type " + std::string(tensor::dtype_info(kv_type).name));
}

void attend_prepare_q(const float* q, int group, const KvView& kv, size_t head_dim, float* scratch) {
  if (head_dim > kMaxHeadDim) throw Error("attention: head_dim " + std::to_string(head_dim) + " is over the limit");
  const AttnKernel& ak = attn_kernel(kv.type, head_dim);
  for (size_t g = 0; g < size_t(group); ++g) ak.prepare_q(q + g * head_dim, head_dim, scratch + g * head_dim);
}

void attend_chunk(int group, const KvView& kv, int first, int n_pos, int chunk, size_t head_dim, ScoreMap map,
                  float* scratch, float* partial) {
  static_assert(kAttnChunk % kKvTileRows == 0);
  const AttnKernel& ak = attn_kernel(kv.type, head_dim);
  const size_t G = size_t(group), C = size_t(kAttnChunk);
  const float* q_conv = scratch;      // G x head_dim*4 bytes (attend_prepare_q)
  float* s = scratch + G * head_dim;  // G x kAttnChunk scores, then probabilities, by position in the chunk
  const int c0 = chunk * kAttnChunk;
  const int p0 = std::max(first, c0), p1 = std::min(n_pos, c0 + kAttnChunk), n = p1 - p0;
  // A tiled K is scored a whole tile at a time, so the positions of p0's
  // and p1's tiles outside [p0, p1) get scores too; they lie in the chunk
  // and are left out of the softmax below.
  if (k_tiled(kv.type) && kv.blocks && kv.block_tokens % kKvTileRows != 0)
    throw Error("attention: a tiled KV type needs blocks of whole tiles");
  auto tile_start = [&](int p) { return p - p % kKvTileRows; };
  auto tile_end = [&](int p) { return (p + kKvTileRows - 1) / kKvTileRows * kKvTileRows; };
  const int k0 = k_tiled(kv.type) ? tile_start(p0) : p0, k1 = k_tiled(kv.type) ? tile_end(p1) : p1;
  for_each_run(kv.k, kv, k0, k1, [&](int j, int rows, const uint8_t* k) {
    const uint8_t* v = k + (kv.v - kv.k);  // V rows at K's offsets
    ak.scores(q_conv, head_dim * sizeof(float), group, k, v, kv.row_stride, rows, head_dim, map.scale, s + (j - c0), C);
  });
  if (map.softcap > 0.f)
    for (size_t g = 0; g < G; ++g)
      for (float* x = s + g * C + (p0 - c0); x < s + g * C + (p1 - c0); ++x) *x = map.softcap * std::tanh(*x / map.softcap);
  // A tiled V is summed whole tiles at a time, its extra positions with p = 0.
  const int v0 = v_tiled(kv.type) ? tile_start(p0) : p0, v1 = v_tiled(kv.type) ? tile_end(p1) : p1;
  float* m = partial;
  float* l = partial + G;
  float* o = partial + 2 * G;
  for (size_t g = 0; g < G; ++g) {
    float* sg = s + g * C;
    m[g] = ak.max(sg + (p0 - c0), size_t(n));
    l[g] = ak.exp_sum(sg + (p0 - c0), size_t(n), m[g]);
    std::fill(sg + (v0 - c0), sg + (p0 - c0), 0.f);
    std::fill(sg + (p1 - c0), sg + (v1 - c0), 0.f);
  }
  std::fill(o, o + G * head_dim, 0.f);
  for_each_run(kv.v, kv, v0, v1, [&](int j, int rows, const uint8_t* v) {
    ak.accumulate(s + (j - c0), C, group, v, kv.row_stride, rows, head_dim, o);
  });
}

void attn_partial_reset(float* acc, int group, size_t head_dim) {
  const size_t G = size_t(group);
  std::fill(acc, acc + G, -std::numeric_limits<float>::infinity());
  std::fill(acc + G, acc + attn_partial_floats(group, head_dim), 0.f);
}

void attn_partial_merge(float* acc, const float* partial, int group, size_t head_dim) {
  const size_t G = size_t(group);
  const bool avx2 = active_isa() >= Isa::Avx2;
  for (size_t g = 0; g < G; ++g) {
    // One of the two factors is e^0 = 1: the larger max's side keeps its
    // scale, and one exponential is computed, not two (an empty acc,
    // m = -inf, gets a = 0).
    const float m = std::max(acc[g], partial[g]);
    const float a = acc[g] < m ? std::exp(acc[g] - m) : 1.f, b = partial[g] < m ? std::exp(partial[g] - m) : 1.f;
    acc[g] = m;
    acc[G + g] = acc[G + g] * a + partial[G + g] * b;
    float* o = acc + 2 * G + g * head_dim;
    const float* po = partial + 2 * G + g * head_dim;
    if (avx2) {
      avx2::rescale_add(o, po, a, b, head_dim);
    } else {
      for (size_t d = 0; d < head_dim; ++d) o[d] = o[d] * a + po[d] * b;
    }
  }
}

void attn_partial_finish(const float* acc, int group, size_t head_dim, float* out) {
  const size_t G = size_t(group);
  for (size_t g = 0; g < G; ++g) {
    const float inv = 1.0f / acc[G + g];
    const float* o = acc + 2 * G + g * head_dim;
    for (size_t d = 0; d < head_dim; ++d) out[g * head_dim + d] = o[d] * inv;
  }
}

// The two partials' room in a thread's scratch (attn_scratch_floats), past
// the prepared q and a chunk's scores: a chunk's partial, then the
// running merge of the chunks before it.
static float* scratch_partial(float* scratch, int group, size_t head_dim) {
  return scratch + size_t(group) * (head_dim + size_t(kAttnChunk));
}
static float* scratch_acc(float* scratch, int group, size_t head_dim) {
  return scratch_partial(scratch, group, head_dim) + attn_partial_floats(group, head_dim);
}

void attend(const float* q, int group, const KvView& kv, int first, int n_pos, size_t head_dim, ScoreMap map,
            float* scratch, float* out) {
  float* partial = scratch_partial(scratch, group, head_dim);
  float* acc = scratch_acc(scratch, group, head_dim);
  attn_partial_reset(acc, group, head_dim);
  attend_prepare_q(q, group, kv, head_dim, scratch);
  for (int c = attn_first_chunk(first); c < attn_chunks(n_pos); ++c) {
    attend_chunk(group, kv, first, n_pos, c, head_dim, map, scratch, partial);
    attn_partial_merge(acc, partial, group, head_dim);
  }
  attn_partial_finish(acc, group, head_dim, out);
}

AttnScratch::AttnScratch(int group, size_t head_dim, int n_threads, int n_ctx)
    : per_thread(size_t(n_threads) * attn_thread_floats(group, head_dim)), split_below(2 * size_t(n_threads)) {
  // A split batch has fewer than split_below items, each with up to
  // attn_chunks(n_ctx) partials.
  partials.resize((split_below - 1) * size_t(attn_chunks(n_ctx)) * attn_slot_floats(group, head_dim));
  chunks_done = std::make_unique<ChunksDone[]>(split_below - 1);
}

void attend_batch(std::span<const AttnItem> items, int group, size_t head_dim, ScoreMap map, ThreadPool& pool,
                  AttnScratch& scratch) {
  const size_t per_thread = attn_thread_floats(group, head_dim), part = attn_slot_floats(group, head_dim);
  if (size_t(pool.size()) * per_thread > scratch.per_thread.size())
    throw Error("attention: the scratch was sized for fewer threads");
  auto thread_scratch = [&](int thread) { return &scratch.per_thread[size_t(thread) * per_thread]; };
  // Items of one chunk each (a decode step before position kAttnChunk) have
  // nothing to split or merge: a task per item.
  const bool one_chunk_each = std::all_of(items.begin(), items.end(), [](const AttnItem& it) {
    return attn_chunks(it.first, it.n_pos) == 1;
  });
  if (items.size() >= scratch.split_below || one_chunk_each) {
    pool.run(items.size(), [&](size_t i, int thread) {
      const AttnItem& it = items[i];
      attend(it.q, group, it.kv, it.first, it.n_pos, head_dim, map, thread_scratch(thread), it.out);
    });
    return;
  }
  // Partials: item i's chunk c goes to slot first[i] + c.
  std::vector<size_t>& first = scratch.first_partial;
  first.assign(items.size() + 1, 0);
  for (size_t i = 0; i < items.size(); ++i)
    first[i + 1] = first[i] + size_t(attn_chunks(items[i].first, items[i].n_pos));
  if (first.back() * part > scratch.partials.size())
    throw Error("attention over more positions than the scratch was sized for");
  // The (item, chunk) list in item order is split into one contiguous range
  // per thread (kernels/range_split.h): a long run of one KV head's rows,
  // which lie one after another in memory (kv/cache.h).
  const size_t n_chunks = first.back();
  scratch.split.reset(n_chunks, size_t(pool.size()), 1);
  for (size_t i = 0; i < items.size(); ++i) scratch.chunks_done[i].n.store(0, std::memory_order_relaxed);
  // The thread that finishes an item's last chunk, whichever it is, merges
  // the item's partials in chunk order, within the same job: a second job
  // for the merges cost every layer of a long decode step a wake-up and a
  // wait, and gave one thread two of the three items' merges while the
  // other idled. A thread reports its chunks of an item once it leaves the
  // item or its claimed range, not one by one: each report is a locked add,
  // which waits for the chunk's stores to drain (a report per chunk took 4%
  // of attend_batch f16 pos:2048 threads:2 in perf).
  auto merge = [&](size_t i, int thread) {
    float* acc = scratch_acc(thread_scratch(thread), group, head_dim);  // the chunks' q and scores stay
    attn_partial_reset(acc, group, head_dim);
    for (size_t task = first[i]; task < first[i + 1]; ++task)
      attn_partial_merge(acc, &scratch.partials[task * part], group, head_dim);
    attn_partial_finish(acc, group, head_dim, items[i].out);
  };
  auto report = [&](size_t i, uint32_t done, int thread) {
    // acq_rel: the report that completes item i sees every other thread's partials of it.
    if (scratch.chunks_done[i].n.fetch_add(done, std::memory_order_acq_rel) + done == first[i + 1] - first[i])
      merge(i, thread);
  };
  pool.run(size_t(pool.size()), [&](size_t own, int thread) {
    // A thread's chunks of one item share its prepared q; a range taken
    // over from another thread starts with a preparation of its own.
    scratch.split.work(own, [&](size_t c0, size_t c1) {
      size_t i = size_t(std::upper_bound(first.begin(), first.end(), c0) - first.begin()) - 1;
      size_t prepared = items.size();
      uint32_t done = 0;  // chunks of item i done and not yet reported
      for (size_t c = c0; c < c1; ++c) {
        while (first[i + 1] <= c) {
          if (done) report(i, done, thread);
          done = 0;
          ++i;
        }
        const AttnItem& it = items[i];
        if (prepared != i) {
          attend_prepare_q(it.q, group, it.kv, head_dim, thread_scratch(thread));
          prepared = i;
        }
        attend_chunk(group, it.kv, it.first, it.n_pos, attn_first_chunk(it.first) + int(c - first[i]), head_dim,
                     map, thread_scratch(thread), &scratch.partials[c * part]);
        ++done;
      }
      if (done) report(i, done, thread);
    });
  });
}

}  // namespace kvlab::kernels
