// Batched decode on the real default model, without the server: one forward
// pass over a batch of N sequences, one new token each, as the server's
// continuous batching runs it (llama.cpp's batched-bench measures the same).
//
//   decode_batch/seqs:<N>/threads:<T>/<isa>
//
// tok/s counts the N tokens of every step. Each sequence starts from a 16-token
// prefill, so attention is short and the weights dominate: one step reads the
// weights once whatever N is, and does N tokens' arithmetic. The default
// model must be in models/ (scripts/setup.sh); the benchmark is skipped
// without it.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "kernels/thread_pool.h"
#include "kv/cache.h"
#include "model/model.h"
#include "model/workspace.h"
#include "micro_common.h"

namespace kvlab::bench {
namespace {

constexpr int kPrefix = 16, kSteps = 256;  // positions of the prefill, then room for the timed steps

// Loaded once per kernel set: the weights' layout at load follows the
// kernels the active ISA has (kernels/rows8.h).
const model::Model* default_model(kernels::Isa isa) {
  static std::unique_ptr<model::Model> loaded[3];
  std::unique_ptr<model::Model>& m = loaded[int(isa)];
  const std::string path = default_model_path();
  if (!m && std::filesystem::exists(path)) m = model::Model::load(path);
  return m.get();
}

void BM_decode_batch(benchmark::State& state, kernels::Isa isa, int n_seq, int threads) {
  use_isa(isa);
  const model::Model* m = default_model(isa);
  if (!m) {
    state.SkipWithError("models/SmolLM2-135M-Instruct.Q4_1.gguf not found (scripts/setup.sh fetches it)");
    return;
  }
  const model::Config& c = m->config();
  kernels::ThreadPool pool(threads);
  kv::Cache cache(model::kv_shape(c), kPrefix + kSteps, n_seq, tensor::DType::F16);
  model::Workspace ws(c, n_seq * kPrefix, kPrefix + kSteps, threads);
  std::vector<float> logits(size_t(c.n_vocab) * size_t(n_seq));
  std::vector<model::BatchEntry> batch;
  for (int s = 0; s < n_seq; ++s)
    for (int p = 0; p < kPrefix; ++p) batch.push_back({int32_t((s * 131 + p * 7919) % c.n_vocab), p, s, p + 1 == kPrefix});
  m->forward(batch, cache, ws, pool, logits.data());
  int pos = kPrefix;
  for (auto _ : state) {
    if (pos == kPrefix + kSteps) {  // out of room: rewind every sequence to its prefix, untimed
      state.PauseTiming();
      for (int s = 0; s < n_seq; ++s) cache.set_used(s, kPrefix);
      pos = kPrefix;
      state.ResumeTiming();
    }
    batch.clear();
    for (int s = 0; s < n_seq; ++s) batch.push_back({int32_t((s * 31 + pos * 7) % c.n_vocab), pos, s, true});
    m->forward(batch, cache, ws, pool, logits.data());
    ++pos;
    benchmark::DoNotOptimize(logits.data());
  }
  state.counters["tok/s"] = benchmark::Counter(double(state.iterations()) * n_seq, benchmark::Counter::kIsRate);
}

int register_all() {
  for (kernels::Isa isa : available_isas()) {
    if (isa == kernels::Isa::Scalar) continue;
    for (int threads : {1, 2})
      for (int n : {1, 2, 4, 8, 16}) {
        const std::string name = "decode_batch/seqs:" + std::to_string(n) + "/threads:" + std::to_string(threads) +
                                 "/" + kernels::isa_name(isa);
        benchmark::RegisterBenchmark(name.c_str(), BM_decode_batch, isa, n, threads)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
  }
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
