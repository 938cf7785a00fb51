// The sampler chain (sample/sampler.h) on one row of SmolLM2-sized logits
// (49152), without a model: greedy (the argmax) and the server's defaults
// (temperature 0.8, top-k 40, top-p 0.95, min-p 0.05), with and without a
// repetition penalty over a 64-token history.
//
//   sample/<greedy|default|penalty>/vocab:49152
#include <benchmark/benchmark.h>

#include <vector>

#include "micro_common.h"
#include "sample/sampler.h"

namespace kvlab::bench {
namespace {

constexpr size_t kVocab = 49152;

void BM_sample(benchmark::State& state, sample::Params p) {
  const std::vector<float> logits = random_floats(kVocab, 7, 8.0f);
  std::vector<int32_t> history(64);
  for (size_t i = 0; i < history.size(); ++i) history[i] = int32_t(i * 613 % kVocab);
  sample::Sampler s(p);
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits, history));
}

int register_all() {
  sample::Params greedy, defaults, penalty;
  greedy.temperature = 0.f;
  penalty.repeat_penalty = 1.1f;
  for (const auto& [name, p] : {std::pair{"greedy", greedy}, std::pair{"default", defaults}, std::pair{"penalty", penalty}})
    benchmark::RegisterBenchmark((std::string("sample/") + name + "/vocab:49152").c_str(), BM_sample, p)
        ->Unit(benchmark::kMicrosecond);
  return 0;
}
const int registered = register_all();

}  // namespace
}  // namespace kvlab::bench
