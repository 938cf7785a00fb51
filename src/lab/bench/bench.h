// llama-bench-style measurements: prompt processing (pp) and text generation
// (tg) at a given KV depth, repeated, after a warm-up. Tokens are fixed ids
// and the next token is not sampled, so tokenization and sampling are left
// out of the timings: only forward passes are timed.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "lab/bench/attribution.h"
#include "lab/bench/stage_profile.h"
#include "model/model.h"

namespace kvlab::engine {

// n_prompt alone: a pp test; n_gen alone: a tg test; both: llama-bench's
// -pg, the prompt then the generation, timed together.
struct BenchTest {
  int n_prompt = 0;   // > 0: this many prompt tokens, in one prefill
  int n_gen = 0;      // > 0: this many generated tokens, one decode step each
  int depth = 0;      // positions already in the KV cache (filled, untimed)
  int threads = 1;
  bool kv_cache = true;
  tensor::DType kv_type = tensor::DType::F16;
  int max_batch = 512;  // tokens per forward pass of a prefill (llama-bench's -ub)
  // tg only: sequences decoding together, each at `depth`, one token each per
  // pass (a continuous-batching decode step; llama-batched-bench's -npl).
  // Their tokens all count.
  int n_parallel = 1;
  std::string name() const;  // "pp512", "tg128 @ d4096", "pp512+tg128", "tg128 x8"
  int n_tokens() const { return n_prompt + n_gen; }  // per sequence
};

struct BenchResult {
  BenchTest test;
  std::vector<double> tok_s;  // one per repetition
  double mean = 0, stddev = 0;
  Attribution roofline;       // summed over the repetitions
  // With profile_stages: `reps` more repetitions, run after the timed ones
  // with the stage clock on, so its reads never slow the tok/s above.
  std::optional<StageProfile> stages;
};

// Throws kvlab::Error when the test does not fit the model's context.
BenchResult run_bench(const model::Model& m, const BenchTest& t, int reps,
                      const std::optional<perf::HwProfile>& profile, bool profile_stages = false);

}  // namespace kvlab::engine
