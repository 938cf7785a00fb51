// How many read passes this machine's caches need to hold a working set
// again after other data was read over and over in between: a decode step
// reads the weights (and K/V) once per step, and a prefill before it reads
// its own activations many times.
//
//   cache_rewarm/set_mib:96/other_mib:<0|64>/pass:<k>
//
// Each iteration reads `other_mib` MiB eight times and the set k-1 times,
// untimed, then times the k-th read of the set, all on one thread with the
// probe's read loop (lab/probe/probe.h). bytes/s is the k-th pass's rate. 96 MiB
// is about the default model's weights; the set and the other buffer sit
// in huge-page memory, as the engine's weights do.
//
// Why: on a CPU with a large non-inclusive L3 that holds the model, kvlab's
// first decode steps after a prompt ran up to ~2x slower than the steady
// state, the same with a 5-token prompt after the model load as after a long
// one, while a dependent add loop timed before each step ran at one speed.
// This loop, outside the engine, shows the same thing: after the other
// reads, the first two passes of the set run at the DRAM rate and the next
// few climb to the L3 rate (docs/performance-log.md, "The quadratic trap").
#include <benchmark/benchmark.h>

#include <cstring>

#include "common/huge_buffer.h"
#include "lab/probe/probe.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

void BM_cache_rewarm(benchmark::State& state) {
  use_best_isa();
  const size_t set_bytes = size_t(state.range(0)) << 20, other_bytes = size_t(state.range(1)) << 20;
  const int pass = int(state.range(2));
  const auto& read = perf::probe_kernels::for_active_isa().read_sum;
  HugeBuffer set(set_bytes), other(other_bytes ? other_bytes : 4096);
  std::memset(set.data(), 1, set_bytes);
  std::memset(other.data(), 2, other.size());
  uint64_t sink = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (int i = 0; other_bytes && i < 8; ++i) sink += read(other.data(), other_bytes);
    for (int i = 1; i < pass; ++i) sink += read(set.data(), set_bytes);
    state.ResumeTiming();
    sink += read(set.data(), set_bytes);
  }
  benchmark::DoNotOptimize(sink);
  state.counters["bytes/s"] = benchmark::Counter(double(set_bytes), benchmark::Counter::kIsIterationInvariantRate);
}

void rewarm_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"set_mib", "other_mib", "pass"});
  for (int other : {0, 64})
    for (int pass = 1; pass <= 6; ++pass) b->Args({96, other, pass});
  b->Iterations(6)->UseRealTime()->Unit(benchmark::kMillisecond);
}

BENCHMARK(BM_cache_rewarm)->Apply(rewarm_args)->Name("cache_rewarm");

}  // namespace
}  // namespace kvlab::bench
