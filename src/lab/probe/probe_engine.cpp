// `kvlab probe`, part two: kvlab's own kernels on this machine, the figures the
// simulator's efficiencies for "this" come from (docs/probe.md, "Engine
// kernels"; docs/perf-model.md section 6). The peaks of probe.cpp say what the
// hardware can do; these say what the engine's matmul and attention kernels
// get out of it, measured in isolation, never from a whole model run.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "common/aligned_vector.h"
#include "common/error.h"
#include "common/huge_buffer.h"
#include "kernels/attention.h"
#include "kernels/kv_tiles.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/rows8.h"
#include "kernels/thread_pool.h"
#include "kv/cache.h"
#include "lab/probe/probe.h"
#include "lab/report/units.h"
#include "tensor/dtype.h"

namespace kvlab::perf {

namespace {

using Clock = std::chrono::steady_clock;

// The weight dtypes the engine has dot kernels for, and its KV cache dtypes.
constexpr tensor::DType kWeightTypes[] = {tensor::DType::F32,  tensor::DType::F16,  tensor::DType::BF16, tensor::DType::Q8_0,
                                          tensor::DType::Q4_0, tensor::DType::Q4_1, tensor::DType::Q5_0, tensor::DType::Q5_1,
                                          tensor::DType::Q4_K, tensor::DType::Q5_K, tensor::DType::Q6_K};
constexpr tensor::DType kKvTypes[] = {tensor::DType::F32, tensor::DType::F16, tensor::DType::Q8_0};
constexpr int kHeadDims[] = {64, 128};

// GEMV shapes: long rows price the bytes, short rows the fixed cost of a
// row, small matrices of short rows the fixed cost of a matmul call.
constexpr size_t kLongCols = 4096, kLongRows = 512;
constexpr size_t kShortCols = 512, kShortRows = 4096;
// Prefill-shaped figures are taken at the engine's default prompt chunk
// (512 tokens, `--ubatch-size`), where its activations outgrow the L2 as a
// real prefill's do: at 64 tokens they stayed in it, and the matmul,
// attention and element-wise rates then read 1.1-1.2x what a 512-token
// prefill's stages run at (`kvlab bench -p 512 --profile` measures those).
// GEMM: 512 tokens (8 of the engine's 64-token tiles) against a 1024 x 1024
// matrix that stays in cache between calls, as a prefill chunk's weights do
// across its token tiles.
constexpr size_t kGemmDim = 1024, kGemmTokens = 512;
// and two of its FLOPs 16x as tall as wide and 16x as wide as tall, to tell
// the costs per token of a call's input columns and output rows from the
// rate per FLOP.
struct GemmShape {
  size_t rows, cols;
};
constexpr GemmShape kGemmShapes[] = {{kGemmDim, kGemmDim}, {4 * kGemmDim, kGemmDim / 4}, {kGemmDim / 4, 4 * kGemmDim}};
// Attention, in kvlab's paged layout (blocks of kv::Cache::kBlockTokens
// positions), for each width of a pass of the kernels (1 .. 4 query heads per
// KV head, GQA), one pool task per (token, KV head) as the engine runs it, at
// least 4 query heads per thread:
//  prefill-shaped: a whole causal chunk, 512 tokens over positions 1..512
//                  (a head's K and V in L2);
//  decode-shaped:  one token over 4096 positions (0.5-1 MiB per KV head),
//                  K and V evicted from the caches before each run.
//  and a short causal chunk, 64 tokens over positions 1..64: the two
//  prefill shapes give a fixed cost per (token, KV head) task beside the
//  rate per FLOP (perf::AttentionRate::prefill_task_s).
constexpr int kAttnPrefillTokens = 512, kAttnPrefillPositions = 512, kAttnDecodePositions = 4096;
constexpr int kAttnShortTokens = 64;
// Element-wise ops of a layer, per token, at a llama width (d 1024, d_ff 2816,
// 16 + 4 heads of 64): 2 RMSNorms, RoPE on q and k, SiLU·up, 2 residual adds,
// one pool job each over 512 tokens (ThreadPool::for_each), as the engine runs them.
constexpr size_t kEwDim = 1024, kEwFf = 2816, kEwHeads = 20, kEwHeadDim = 64, kEwTokens = 512;

std::atomic<uint64_t> g_evict_sink{0};  // keeps evict()'s reads

struct Timer {
  int min_runs, max_runs;
  double max_s;
  // Runs fn up to max_runs times (at least min_runs, no new run after max_s).
  template <class F>
  void repeat(const F& fn) const {
    const Clock::time_point start = Clock::now();
    for (int i = 0; i < max_runs; ++i) {
      fn();
      if (i + 1 >= min_runs && std::chrono::duration<double>(Clock::now() - start).count() > max_s) break;
    }
  }
  // The median of fn's runs, seconds. Unlike the peaks (the best window:
  // what the hardware can do), these become efficiencies that predict
  // typical runs, so they are typical runs.
  // `before` runs untimed ahead of every run.
  template <class F, class G = void (*)()>
  double median(const F& fn, const G& before = [] {}) const {
    std::vector<double> s;
    repeat([&] {
      before();
      s.push_back(seconds(fn));
    });
    return middle(s);
  }
  // The medians of each of fns, run in turn (a run is one of each).
  template <class... F>
  std::array<double, sizeof...(F)> medians(const F&... fns) const {
    std::array<std::vector<double>, sizeof...(F)> s;
    repeat([&] {
      size_t i = 0;
      (s[i++].push_back(seconds(fns)), ...);
    });
    std::array<double, sizeof...(F)> m;
    for (size_t i = 0; i < m.size(); ++i) m[i] = middle(s[i]);
    return m;
  }

 private:
  template <class F>
  static double seconds(const F& fn) {
    const Clock::time_point t0 = Clock::now();
    fn();
    return std::chrono::duration<double>(Clock::now() - t0).count();
  }
  static double middle(std::vector<double>& s) {
    std::sort(s.begin(), s.end());
    return s[s.size() / 2];
  }
};

// `bytes` of valid encoded weights: one row of 4096 random values in [-1, 1)
// encoded in `t`, repeated. Rows of any width (a whole number of blocks) cut
// from it are valid rows, and no value is denormal, infinite or NaN.
void fill_weights(tensor::DType t, uint8_t* p, size_t bytes) {
  const tensor::DTypeInfo& info = tensor::dtype_info(t);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> row(kLongCols);
  for (float& v : row) v = u(rng);
  const size_t rb = *tensor::row_bytes(t, kLongCols);
  info.quantize(row.data(), p, kLongCols);
  for (size_t off = rb; off < bytes; off += rb) std::memcpy(p + off, p, std::min(rb, bytes - off));
}

// What one weight dtype's matmul measurements share: activations and outputs
// big enough for every shape, on cache-line boundaries as the engine's
// (model/model.h), and the pool and scratch the matmuls run on.
struct MatmulBench {
  tensor::DType t;
  kernels::ThreadPool& pool;
  const Timer& timer;
  kernels::MatmulScratch scratch;
  AlignedVector<float> x = AlignedVector<float>(kGemmTokens * 4 * kGemmDim, 0.5f);
  AlignedVector<float> y = AlignedVector<float>(kGemmTokens * std::max(4 * kGemmDim, kShortRows));

  // A `rows` x `cols` matrix of valid weights at `at`, in the layout the
  // engine loads them in (kernels/rows8.h). Re-filled for every shape (the
  // rows-of-8 layout depends on it).
  kernels::WeightMatrix place(uint8_t* at, size_t rows, size_t cols) const {
    kernels::WeightMatrix m{t, at, rows, cols, *tensor::row_bytes(t, cols)};
    fill_weights(t, at, m.bytes());
    kernels::relayout_rows8(m, at);
    return m;
  }
  void multiply(const kernels::WeightMatrix& w, size_t tokens) {
    kernels::matmul(w, x.data(), tokens, y.data(), pool, scratch);
  }
};

// `n` matrices of `rows` x `cols` filling `buf` from the start.
std::vector<kernels::WeightMatrix> place_stream(const MatmulBench& b, uint8_t* buf, size_t rows, size_t cols, size_t n) {
  std::vector<kernels::WeightMatrix> ms;
  for (size_t i = 0; i < n; ++i) ms.push_back(b.place(buf + i * rows * *tensor::row_bytes(b.t, cols), rows, cols));
  return ms;
}

// One pass over the buffer (>= 2 x L3, so from DRAM) through `ms`, one
// activation row each: a decode step's matmuls. Seconds.
double stream_pass(MatmulBench& b, const std::vector<kernels::WeightMatrix>& ms) {
  return b.timer.median([&] {
    for (const auto& m : ms) b.multiply(m, 1);
  });
}

// Decode: three shapes over the same bytes: long rows (A), short rows (B: 8x
// the rows of A, as many calls), and B cut into matrices 8x smaller (C: as
// many rows as B, 8x the calls). t = bytes / rate + rows · t_row + calls ·
// t_call for each: three equations, three unknowns. Negative costs are noise
// around zero.
void measure_gemv(MatmulBench& b, uint8_t* buf, size_t buf_bytes, MatmulRate& r) {
  const size_t n = buf_bytes / (kLongRows * *tensor::row_bytes(b.t, kLongCols));
  const double bytes = double(n * kLongRows * *tensor::row_bytes(b.t, kLongCols));
  const auto long_rows = place_stream(b, buf, kLongRows, kLongCols, n);
  const double t_a = stream_pass(b, long_rows);
  const auto short_rows = place_stream(b, buf, kShortRows, kShortCols, n);
  const double t_b = stream_pass(b, short_rows);
  const double t_c = stream_pass(b, place_stream(b, buf, kShortRows / 8, kShortCols, 8 * n));
  const double rows_a = double(n * kLongRows), rows_b = double(n * kShortRows);
  r.gemv_call_s = std::max(0.0, (t_c - t_b) / double(7 * n));
  r.gemv_row_s = std::max(0.0, (t_b - t_a) / (rows_b - rows_a));
  r.gemv_bytes_per_s = bytes / std::max(1e-9, t_a - rows_a * r.gemv_row_s - double(n) * r.gemv_call_s);
}

// The prefill costs from the seconds `s` of the three kGemmShapes: each other
// shape's time less the square's is
// d_i = tokens · (dcols_i · input_s + drows_i · output_s), i = 1, 2.
void solve_gemm_costs(const std::array<double, 3>& s, MatmulRate& r) {
  double dc[2], dr[2], d[2];
  for (int i = 0; i < 2; ++i) {
    dc[i] = double(kGemmTokens) * (double(kGemmShapes[i + 1].cols) - double(kGemmShapes[0].cols));
    dr[i] = double(kGemmTokens) * (double(kGemmShapes[i + 1].rows) - double(kGemmShapes[0].rows));
    d[i] = s[size_t(i) + 1] - s[0];
  }
  const double det = dc[0] * dr[1] - dc[1] * dr[0];
  r.gemm_input_s = std::max(0.0, (d[0] * dr[1] - d[1] * dr[0]) / det);
  r.gemm_output_s = std::max(0.0, (dc[0] * d[1] - dc[1] * d[0]) / det);
  const double fixed = double(kGemmTokens) * (double(kGemmShapes[0].cols) * r.gemm_input_s +
                                              double(kGemmShapes[0].rows) * r.gemm_output_s);
  r.gemm_ops_per_s = 2.0 * double(kGemmDim * kGemmDim * kGemmTokens) / std::max(1e-9, s[0] - fixed);
}

// Prefill: a 512-token chunk against a cached matrix, 2 op per multiply-add,
// for three matrices of the same FLOPs: square, tall and wide. t = FLOPs /
// rate + tokens · (cols · input_s + rows · output_s) for each: three
// equations, three unknowns (a negative cost is noise around zero).
// A run takes a few milliseconds, so a few of them can catch a burst of speed
// the engine's seconds-long prefills do not sustain (one round in three of
// bench/sim-vs-measured priced prefill 1.5x fast when runs were 64 tokens):
// the median of many runs over a longer window, the three shapes in turn, so
// all see the machine in the same state.
void measure_gemm(MatmulBench& b, uint8_t* buf, MatmulRate& r) {
  kernels::WeightMatrix gemms[std::size(kGemmShapes)];
  for (size_t i = 0, at = 0; i < std::size(kGemmShapes); ++i) {
    gemms[i] = b.place(buf + at, kGemmShapes[i].rows, kGemmShapes[i].cols);
    at += gemms[i].bytes();
  }
  for (const kernels::WeightMatrix& w : gemms) b.multiply(w, kGemmTokens);  // warm the caches
  // As many matmuls as 4x the least and 8x the most runs of one.
  const Timer sustained{b.timer.min_runs * 4 / 3, b.timer.max_runs * 8 / 3, b.timer.max_s * 3};
  solve_gemm_costs(sustained.medians([&] { b.multiply(gemms[0], kGemmTokens); },
                                     [&] { b.multiply(gemms[1], kGemmTokens); },
                                     [&] { b.multiply(gemms[2], kGemmTokens); }),
                   r);
}

MatmulRate measure_matmul(tensor::DType t, uint8_t* buf, size_t buf_bytes, kernels::ThreadPool& pool,
                          const Timer& timer) {
  MatmulRate r;
  r.weights = std::string(tensor::dtype_info(t).name);
  MatmulBench b{t, pool, timer, {}};
  measure_gemv(b, buf, buf_bytes, r);
  measure_gemm(b, buf, r);
  return r;
}

// Reads every cache line of `bytes` on the pool, as a decode step's weights
// go through the caches between one layer's attention and the next. On the
// pool, so its workers are awake when the timed job follows, as they are
// after the matmul before a decode step's attention.
void evict(std::span<const uint8_t> bytes, kernels::ThreadPool& pool) {
  constexpr size_t kChunk = size_t(1) << 20;
  pool.run((bytes.size() + kChunk - 1) / kChunk, [&](size_t c, int) {
    uint64_t sum = 0;
    for (size_t i = c * kChunk; i < std::min(bytes.size(), (c + 1) * kChunk); i += 64) sum += bytes[i];
    g_evict_sink.fetch_add(sum, std::memory_order_relaxed);
  });
}

// FLOP/s of `n_tokens` query tokens x n_kv KV heads x `group` query heads, each over `n_pos`
// cached positions (the last token sees them all, causally earlier ones
// fewer), as perf::Cost counts attention: 4·head_dim + 6 per query-key pair.
// With `flush` (bytes several times the L3), every run starts with K and V
// out of the caches, as in a decode step, where the weights streamed through
// them since this layer's attention last ran.
struct AttnTiming {
  double flops = 0, seconds = 0;
  double rate() const { return flops / seconds; }
};
AttnTiming measure_attention(tensor::DType kv, size_t hd, int n_kv, int group, int n_tokens, int n_pos,
                             kernels::ThreadPool& pool, const Timer& timer, std::span<const uint8_t> flush = {}) {
  const int n_heads = n_kv * group, bt = kv::Cache::kBlockTokens;
  const size_t head_bytes = *tensor::row_bytes(kv, hd);
  const int n_blocks = (n_pos + bt - 1) / bt;
  const size_t region = head_bytes * size_t(n_blocks * bt);  // one KV head's rows, as the cache lays them out
  std::vector<uint8_t> k(region * size_t(n_kv)), v(k.size());
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> vals(hd);
  for (int g = 0; g < n_kv; ++g)
    for (int pos = 0; pos < n_blocks * bt; ++pos) {
      for (float& x : vals) x = u(rng);
      kernels::store_k(kv, k.data() + size_t(g) * region, pos, vals.data(), hd);
      kernels::store_v(kv, v.data() + size_t(g) * region, pos, vals.data(), hd);
    }
  std::vector<int32_t> blocks(static_cast<size_t>(n_blocks));
  for (int b = 0; b < n_blocks; ++b) blocks[size_t(b)] = b;
  // One item per token and KV head, as the forward pass hands them over.
  std::vector<float> q(size_t(n_tokens * n_heads) * hd, 0.1f), out(q.size());
  std::vector<kernels::AttnItem> items;
  for (int t = 0; t < n_tokens; ++t)
    for (int g = 0; g < n_kv; ++g) {
      const size_t at = (size_t(t) * size_t(n_heads) + size_t(g * group)) * hd;
      kernels::KvView view{k.data() + size_t(g) * region, v.data() + size_t(g) * region, head_bytes, kv,
                           blocks.data(), bt, head_bytes * size_t(bt)};
      items.push_back({&q[at], view, n_pos - n_tokens + 1 + t, &out[at]});
    }
  kernels::AttnScratch scratch(group, hd, pool.size(), n_pos);
  const float scale = 1.0f / std::sqrt(float(hd));
  double pairs = 0;
  for (int t = 0; t < n_tokens; ++t) pairs += double(n_heads) * (n_pos - n_tokens + 1 + t);
  auto job = [&] { kernels::attend_batch(items, group, hd, scale, pool, scratch); };
  job();
  return {pairs * (4.0 * double(hd) + 6.0), timer.median(job, [&] { evict(flush, pool); })};
}

// FLOP/s of a layer's element-wise ops (perf::Cost's counts per token:
// 2 x 4·d for the norms, 3·rope_dim·heads for RoPE, 5·d_ff for SiLU·up,
// 2·d for the residual adds).
double measure_elementwise(kernels::ThreadPool& pool, const Timer& timer) {
  const size_t T = kEwTokens, d = kEwDim, ff = kEwFf, qk = kEwHeads * kEwHeadDim;
  std::vector<float> x(T * d, 0.5f), xn(T * d), gate(T * ff, 0.25f), up(T * ff, 0.5f), heads(T * qk, 0.5f);
  std::vector<float> gain(d, 1.0f), cs(kEwHeadDim);
  kernels::rope_table(100, kEwHeadDim, 10000.0f, cs.data());
  auto job = [&] {
    pool.for_each(T, [&](size_t t, int) { kernels::rmsnorm(&x[t * d], gain.data(), d, 1e-5f, &xn[t * d]); });
    pool.for_each(T, [&](size_t t, int) {
      for (size_t h = 0; h < kEwHeads; ++h) kernels::rope(&heads[t * qk + h * kEwHeadDim], kEwHeadDim, cs.data(), false);
    });
    pool.for_each(T, [&](size_t t, int) { kernels::add(&x[t * d], &xn[t * d], d); });
    pool.for_each(T, [&](size_t t, int) { kernels::rmsnorm(&x[t * d], gain.data(), d, 1e-5f, &xn[t * d]); });
    pool.for_each(T, [&](size_t t, int) { kernels::silu_mul(&gate[t * ff], &up[t * ff], ff); });
    pool.for_each(T, [&](size_t t, int) { kernels::add(&x[t * d], &xn[t * d], d); });
  };
  job();
  const double flops = double(T) * (2 * 4.0 * d + 3.0 * kEwHeadDim * kEwHeads + 5.0 * ff + 2.0 * d);
  return flops / timer.median(job);
}

}  // namespace

KernelRates measure_engine_kernels(int threads, uint64_t stream_bytes, bool quick,
                                   const std::function<void(const std::string&)>& progress) {
  kernels::ThreadPool pool(threads);
  KernelRates k;
  k.threads = threads;
  const Timer timer{3, quick ? 3 : 9, quick ? 0.05 : 0.15};
  // Attention has 48 figures (every KV type, head width and pass width) and
  // runs of a few milliseconds: a shorter window each keeps the probe short.
  const Timer attention_timer{3, quick ? 3 : 9, quick ? 0.05 : 0.1};
  // Whole matrices of the long and the short shape must fit.
  const size_t mat = kLongRows * kLongCols * sizeof(float);
  const size_t bytes = std::max<size_t>(size_t(stream_bytes) / mat * mat, mat);
  // Huge pages, as the engine's weights (gguf::Residency::Resident).
  const HugeBuffer buf(bytes);
  k.gemv_working_set_bytes = double(bytes);
  for (tensor::DType t : kWeightTypes) {
    k.matmul.push_back(measure_matmul(t, buf.data(), bytes, pool, timer));
    const MatmulRate& r = k.matmul.back();
    if (progress)
      progress("probe: kvlab matmul " + r.weights + ": decode " + fmt_bandwidth(r.gemv_bytes_per_s) + " + " +
               fmt_seconds(r.gemv_row_s) + " per row + " + fmt_seconds(r.gemv_call_s) + " per call; prefill " +
               fmt_flops(r.gemm_ops_per_s) + " + " + fmt_seconds(r.gemm_input_s) + " per token-input + " +
               fmt_seconds(r.gemm_output_s) + " per token-output");
  }
  // At least 4 query heads per thread and 16 in all.
  const int heads = std::max(16, 4 * threads);
  for (tensor::DType kv : kKvTypes)
    for (int hd : kHeadDims)
      for (int group = 1; group <= kernels::kAttnHeadsPerPass; ++group) {
        const int n_kv = (heads + group - 1) / group;
        const AttnTiming decode = measure_attention(kv, size_t(hd), n_kv, group, 1, kAttnDecodePositions, pool,
                                                    attention_timer, {buf.data(), bytes});
        const AttnTiming chunk = measure_attention(kv, size_t(hd), n_kv, group, kAttnPrefillTokens,
                                                   kAttnPrefillPositions, pool, attention_timer);
        const AttnTiming shrt = measure_attention(kv, size_t(hd), n_kv, group, kAttnShortTokens, kAttnShortTokens,
                                                  pool, attention_timer);
        // t = tasks · task_s + flops / rate for both chunks: two equations,
        // two unknowns (a negative task cost is noise around zero).
        const double tasks_chunk = double(kAttnPrefillTokens * n_kv), tasks_short = double(kAttnShortTokens * n_kv);
        const double task_s = std::max(0.0, (chunk.seconds * shrt.flops - shrt.seconds * chunk.flops) /
                                                (tasks_chunk * shrt.flops - tasks_short * chunk.flops));
        AttentionRate a{std::string(tensor::dtype_info(kv).name), hd, group, decode.rate(),
                        chunk.flops / std::max(1e-12, chunk.seconds - tasks_chunk * task_s), task_s};
        k.attention.push_back(a);
        if (progress)
          progress("probe: kvlab attention, kv " + a.kv + ", head_dim " + std::to_string(hd) +
                   ", query heads per pass " + std::to_string(group) + ": decode " + fmt_flops(a.decode_flops_per_s) +
                   ", prefill " + fmt_flops(a.prefill_flops_per_s) + " + " + fmt_seconds(a.prefill_task_s) +
                   " per (token, KV head)");
      }
  k.elementwise_flops_per_s = measure_elementwise(pool, timer);
  if (progress) progress("probe: kvlab element-wise ops: " + fmt_flops(k.elementwise_flops_per_s));
  // A job of one trivial task per thread: publish, wake, claim, join.
  constexpr int kJobs = 2000;
  const double s = timer.median([&] {
    for (int i = 0; i < kJobs; ++i) pool.run(size_t(threads), [](size_t, int) {});
  });
  k.dispatch_s = s / kJobs;
  if (progress) progress("probe: kvlab thread pool: " + fmt_seconds(k.dispatch_s) + " per job");
  return k;
}

}  // namespace kvlab::perf
