#include "lab/bench/bench.h"

#include <cmath>
#include <numeric>

#include "common/error.h"
#include "engine/session.h"

namespace kvlab::engine {

std::string BenchTest::name() const {
  std::string s = n_prompt > 0 && n_gen > 0 ? "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen)
                  : n_prompt > 0              ? "pp" + std::to_string(n_prompt)
                                              : "tg" + std::to_string(n_gen);
  if (depth > 0) s += " @ d" + std::to_string(depth);
  return s;
}

namespace {
// A fixed, model-independent token stream (a stride through the vocabulary).
std::vector<int32_t> tokens(int n, int n_vocab, int offset) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = int32_t((int64_t(i + offset) * 7919 + 17) % n_vocab);
  return ids;
}

// One repetition; returns the timed seconds. The session's trace is cleared
// after the untimed depth fill so it holds only the timed passes, and
// `stage_times` (when non-null) collects over the same passes.
double run_once(Session& s, const BenchTest& t, int n_vocab, model::StageTimes* stage_times = nullptr) {
  s.reset();
  if (t.depth > 0) s.prefill(tokens(t.depth, n_vocab, 0));
  s.trace().clear();
  s.collect_stage_times(stage_times);
  const auto t0 = Clock::now();
  if (t.n_prompt > 0) s.prefill(tokens(t.n_prompt, n_vocab, t.depth));
  if (t.n_gen > 0) {
    const int at = t.depth + t.n_prompt;
    const auto ids = tokens(t.n_gen, n_vocab, at);
    if (at == 0) s.prefill({ids.data(), 1});  // the first token has no cache to decode against
    for (int i = at == 0 ? 1 : 0; i < t.n_gen; ++i) s.decode(ids[size_t(i)]);
  }
  const double seconds = seconds_since(t0);
  s.collect_stage_times(nullptr);
  return seconds;
}
}  // namespace

BenchResult run_bench(const model::Model& m, const BenchTest& t, int reps, const std::optional<perf::HwProfile>& profile,
                      bool profile_stages) {
  if (reps < 1) throw Error("repetitions must be >= 1");
  if (t.n_tokens() <= 0) throw Error("a bench test needs prompt or generated tokens");
  const int needed = t.depth + t.n_tokens();
  if (needed > m.config().n_ctx_train)
    throw Error(t.name() + " needs " + std::to_string(needed) + " positions; the model's context is " +
                std::to_string(m.config().n_ctx_train));
  SessionOptions o;
  o.n_ctx = needed;
  o.n_threads = t.threads;
  o.kv_cache = t.kv_cache;
  o.kv_type = t.kv_type;
  o.max_batch = t.max_batch;
  Session s(m, o);
  const int n_vocab = m.config().n_vocab;
  const double n_timed = t.n_tokens();

  // Warm-up: page in the weights, settle the clocks, wake the pool. One run
  // is not enough for short tests: right after the model is loaded, the
  // first timed pp32 repetitions of a process can run at half speed, ramping
  // up over several repetitions (`kvlab bench -p 32 -r 10` in fresh
  // processes shows it), which 10 repetitions do not average away. So it
  // lasts at least kWarmupSeconds.
  constexpr double kWarmupSeconds = 0.5;
  const auto warm0 = Clock::now();
  do run_once(s, t, n_vocab);
  while (seconds_since(warm0) < kWarmupSeconds);
  BenchResult r;
  r.test = t;
  Trace all;
  for (int i = 0; i < reps; ++i) {
    r.tok_s.push_back(n_timed / run_once(s, t, n_vocab));
    all.steps.insert(all.steps.end(), s.trace().steps.begin(), s.trace().steps.end());
  }
  r.mean = std::accumulate(r.tok_s.begin(), r.tok_s.end(), 0.0) / reps;
  double var = 0;
  for (double x : r.tok_s) var += (x - r.mean) * (x - r.mean);
  r.stddev = reps > 1 ? std::sqrt(var / (reps - 1)) : 0;
  r.roofline = attribute(all, m, s.cache().elem_bytes(), t.threads, profile);
  if (profile_stages) {
    model::StageTimes times;
    Trace profiled;
    for (int i = 0; i < reps; ++i) {
      run_once(s, t, n_vocab, &times);
      profiled.steps.insert(profiled.steps.end(), s.trace().steps.begin(), s.trace().steps.end());
    }
    r.stages = stage_profile(times, profiled, m, s.cache().elem_bytes());
  }
  return r;
}

}  // namespace kvlab::engine
