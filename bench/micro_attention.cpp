// attend (kernels/attention.h): one group of query heads over n_pos cached
// positions of their KV head, per KV type (f16, f32, q8_0) and ISA, with
// SmolLM2-135M's geometry (head_dim 64, 3 query heads per KV head, 3 KV
// heads), each KV head's rows contiguous as in the cache (kv/cache.h).
//
//   attend/<kv type>/pos:<n>/<isa>
//   attend/<kv type>/pos:1024/group:<G>          (best ISA; G query heads per KV head)
//   attend_step/<kv type>/pos:<n>/layers:<L>   (best ISA)
//   attend_batch/<kv type>/pos:<100|2048>/layers:<L>/threads:2/<isa>
//   attend_batch/<kv type>/pos:2048/layers:<1|90>/threads:<1|2>/<isa>
//   attend_seqs/f16/seqs:<B>/layers:30/threads:2     (best ISA)
//   attend_seqs/f16/seqs:1/pos:<sum>/layers:30/threads:2
//
// attend_step is one decode step's attention on one thread: all 3 KV heads
// of L layers, each layer's K and V in its own buffer, head-major as in the
// KV cache (kv/cache.h: each head's rows contiguous). With L = 30 (the
// model's depth) the buffers far exceed the last-level cache at pos:2048, so
// the rows come from DRAM, as in the engine; with L = 1 they stay cached.
//
// attend_batch is that step as the engine runs it: each layer's three KV
// heads are one attend_batch call on a pool of 2 threads, which splits their
// chunks over the threads, then merges the partials (wall time). With L = 90
// (141 MiB of f16 K/V) no row is still in the last-level cache when it is
// read again, as in the engine, where the weights stream through the cache
// between two steps; with L = 30 (47 MiB) part of them is (on a 32 MiB L3,
// L = 30 reads faster than L = 90, and the engine's attention at 2048
// positions costs what L = 90 predicts). At pos:2048, layers:1 (cached) and
// layers:90 (DRAM) also run on 1 thread, to show what the second thread adds
// (docs/performance-log.md, "Attention and the KV cache").
//
// attend_seqs is a decode pass of B sequences at different positions (spread
// evenly over 100 .. 2000, as the server's streams are), 3 KV heads each,
// in one attend_batch call per layer; seqs:1/pos:<sum> is one sequence as
// long as the B together, the same K/V bytes. Their bytes/s side by side is
// the cost of batching: what a pass spends per sequence besides its rows.
//
// bytes/s counts the K and V rows read (2 * n_pos * one head's row bytes);
// at pos:4096 with f16 that is 1 MiB per KV head, more than L2 on most CPUs.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/huge_buffer.h"
#include "kernels/attention.h"
#include "kernels/kv_tiles.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

using tensor::DType;
constexpr size_t kHeadDim = 64;
constexpr size_t kKvHeads = 3;
constexpr int kGroup = 3;

// K and V of kKvHeads KV heads over n_pos positions, each head's rows
// contiguous as in the cache (kv/cache.h; an f16 or q8_0 K in tiles,
// kernels/kv_tiles.h), every position holding the same values: the values do
// not change the work. On huge pages, as the cache's.
struct HeadRows {
  DType type;
  int n_pos;
  size_t head_bytes, region;  // region: one head's rows, whole tiles
  HugeBuffer k, v;
  HeadRows(DType t, int n)
      : type(t),
        n_pos(n),
        head_bytes(*tensor::row_bytes(t, kHeadDim)),
        region(head_bytes * size_t((n + kernels::kKvTileRows - 1) / kernels::kKvTileRows * kernels::kKvTileRows)),
        k(kKvHeads * region),
        v(k.size()) {
    const auto src = random_floats(kHeadDim, 3);
    for (size_t h = 0; h < kKvHeads; ++h)
      for (int j = 0; j < n_pos; ++j) {
        kernels::store_k(t, k.data() + h * region, j, src.data(), kHeadDim);
        kernels::store_v(t, v.data() + h * region, j, src.data(), kHeadDim);
      }
  }
  kernels::KvView view(size_t head) const {
    kernels::KvView kv;
    kv.k = k.data() + head * region;
    kv.v = v.data() + head * region;
    kv.row_stride = head_bytes;
    kv.type = type;
    return kv;
  }
};

void BM_attend(benchmark::State& state, DType kv_type, int n_pos, kernels::Isa isa, int group) {
  use_isa(isa);
  const HeadRows rows(kv_type, n_pos);
  const kernels::KvView kv = rows.view(1);
  const auto q = random_floats(size_t(group) * kHeadDim, 5);
  std::vector<float> scratch(kernels::attn_scratch_floats(group, kHeadDim)), out(size_t(group) * kHeadDim);
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  for (auto _ : state) {
    kernels::attend(q.data(), group, kv, 0, n_pos, kHeadDim, scale, scratch.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(2.0 * double(n_pos) * double(rows.head_bytes));
  state.counters["FLOP/s"] = rate(4.0 * group * double(n_pos) * double(kHeadDim));  // q·k and p·v
  state.counters["pos/s"] = rate(double(n_pos));
}

// One decode step's K and V: per layer, the rows of the kKvHeads heads in
// their own buffers.
struct StepKv {
  std::vector<HeadRows> layers;
  StepKv(DType t, int n, int n_layers) {
    layers.reserve(size_t(n_layers));
    for (int l = 0; l < n_layers; ++l) layers.emplace_back(t, n);
  }
  kernels::KvView view(int layer, size_t head) const { return layers[size_t(layer)].view(head); }
  double bytes() const {
    const HeadRows& r = layers.front();
    return 2.0 * double(layers.size()) * double(r.n_pos) * double(kKvHeads * r.head_bytes);
  }
};

void BM_attend_step(benchmark::State& state, DType kv_type, int n_pos, int layers) {
  use_best_isa();
  const StepKv kv(kv_type, n_pos, layers);
  const auto q = random_floats(kGroup * kHeadDim, 5);
  std::vector<float> scratch(kernels::attn_scratch_floats(kGroup, kHeadDim)), out(kGroup * kHeadDim);
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  for (auto _ : state) {
    for (int l = 0; l < layers; ++l)
      for (size_t h = 0; h < kKvHeads; ++h)
        kernels::attend(q.data(), kGroup, kv.view(l, h), 0, n_pos, kHeadDim, scale, scratch.data(), out.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(kv.bytes());
  state.counters["pos/s"] = rate(double(layers) * double(kKvHeads) * double(n_pos));
}

void BM_attend_batch(benchmark::State& state, DType kv_type, int n_pos, int layers, int threads, kernels::Isa isa) {
  use_isa(isa);
  const StepKv kv(kv_type, n_pos, layers);
  const auto q = random_floats(kKvHeads * kGroup * kHeadDim, 5);
  std::vector<float> out(kKvHeads * kGroup * kHeadDim);
  kernels::ThreadPool pool(threads);
  kernels::AttnScratch scratch(kGroup, kHeadDim, threads, n_pos);
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  std::vector<kernels::AttnItem> items(kKvHeads);
  for (auto _ : state) {
    for (int l = 0; l < layers; ++l) {
      for (size_t h = 0; h < kKvHeads; ++h)
        items[h] = {q.data() + h * kGroup * kHeadDim, kv.view(l, h), n_pos, out.data() + h * kGroup * kHeadDim};
      kernels::attend_batch(items, kGroup, kHeadDim, scale, pool, scratch);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(kv.bytes());
  state.counters["pos/s"] = rate(double(layers) * double(kKvHeads) * double(n_pos));
}

// Sequence s of B at position 100 + 1900 s / (B - 1).
std::vector<int> spread_positions(int n_seq) {
  std::vector<int> pos;
  for (int s = 0; s < n_seq; ++s) pos.push_back(n_seq == 1 ? 2000 : 100 + 1900 * s / (n_seq - 1));
  return pos;
}

void BM_attend_seqs(benchmark::State& state, const std::vector<int>& positions, int layers) {
  use_best_isa();
  constexpr DType kType = DType::F16;
  std::vector<StepKv> seqs;  // each sequence's rows of every layer
  int longest = 0;
  double bytes = 0;
  for (int n : positions) {
    seqs.emplace_back(kType, n, layers);
    bytes += seqs.back().bytes();
    longest = std::max(longest, n);
  }
  const size_t n_items = positions.size() * kKvHeads, item_floats = kGroup * kHeadDim;
  const auto q = random_floats(n_items * item_floats, 5);
  std::vector<float> out(n_items * item_floats);
  kernels::ThreadPool pool(2);
  kernels::AttnScratch scratch(kGroup, kHeadDim, pool.size(), longest);
  const float scale = 1.0f / std::sqrt(float(kHeadDim));
  std::vector<kernels::AttnItem> items(n_items);
  for (auto _ : state) {
    for (int l = 0; l < layers; ++l) {
      for (size_t i = 0; i < n_items; ++i)
        items[i] = {q.data() + i * item_floats, seqs[i / kKvHeads].view(l, i % kKvHeads),
                    positions[i / kKvHeads], out.data() + i * item_floats};
      kernels::attend_batch(items, kGroup, kHeadDim, scale, pool, scratch);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["bytes/s"] = rate(bytes);
}

void register_seqs() {
  constexpr int kLayers = 30;
  for (int n_seq : {1, 2, 4, 8, 16}) {
    const std::vector<int> spread = spread_positions(n_seq);
    int sum = 0;
    for (int p : spread) sum += p;
    const std::string seqs = "attend_seqs/f16/seqs:" + std::to_string(n_seq);
    const std::string one = "attend_seqs/f16/seqs:1/pos:" + std::to_string(sum);
    benchmark::RegisterBenchmark((seqs + "/layers:30/threads:2").c_str(), BM_attend_seqs, spread, kLayers)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    if (n_seq > 1)
      benchmark::RegisterBenchmark((one + "/layers:30/threads:2").c_str(), BM_attend_seqs, std::vector<int>{sum},
                                   kLayers)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
  }
}

int register_all() {
  register_seqs();
  for (DType kv : {DType::F16, DType::Q8_0})
    for (int layers : {1, 30}) {
      const std::string name = "attend_step/" + dtype_name(kv) + "/pos:2048/layers:" + std::to_string(layers);
      benchmark::RegisterBenchmark(name.c_str(), BM_attend_step, kv, 2048, layers);
    }
  struct BatchCase {
    int n_pos, layers, threads;
  };
  const BatchCase batch_cases[] = {{100, 30, 2}, {100, 90, 2}, {2048, 30, 2}, {2048, 90, 2},
                                   {2048, 1, 1},  {2048, 1, 2},  {2048, 90, 1}};
  for (DType kv : {DType::F16, DType::Q8_0})
    for (const BatchCase& b : batch_cases)
      for (kernels::Isa isa : available_isas()) {
        if (isa == kernels::Isa::Scalar) continue;
        const std::string name = "attend_batch/" + dtype_name(kv) + "/pos:" + std::to_string(b.n_pos) + "/layers:" +
                                 std::to_string(b.layers) + "/threads:" + std::to_string(b.threads) + "/" +
                                 kernels::isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(), BM_attend_batch, kv, b.n_pos, b.layers, b.threads, isa)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
  for (DType kv : {DType::F16, DType::F32, DType::Q8_0})
    for (int n : {128, 1024, 4096})
      for (kernels::Isa isa : available_isas()) {
        const std::string name =
            "attend/" + dtype_name(kv) + "/pos:" + std::to_string(n) + "/" + kernels::isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(), BM_attend, kv, n, isa, kGroup);
      }
  for (DType kv : {DType::F16, DType::Q8_0})
    for (int group : {1, 2, 3, 4, 8}) {
      const std::string name = "attend/" + dtype_name(kv) + "/pos:1024/group:" + std::to_string(group);
      benchmark::RegisterBenchmark(name.c_str(), BM_attend, kv, 1024, kernels::cpu().best(), group);
    }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
