#include "lab/bench/bench.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "common/error.h"
#include "engine/batch_runner.h"
#include "engine/session.h"

namespace kvlab::engine {

std::string BenchTest::name() const {
  std::string s = n_prompt > 0 && n_gen > 0 ? "pp" + std::to_string(n_prompt) + "+tg" + std::to_string(n_gen)
                  : n_prompt > 0              ? "pp" + std::to_string(n_prompt)
                                              : "tg" + std::to_string(n_gen);
  if (n_parallel > 1) s += " x" + std::to_string(n_parallel);
  if (depth > 0) s += " @ d" + std::to_string(depth);
  return s;
}

namespace {
// A fixed, model-independent token stream (a stride through the vocabulary).
int32_t token_at(int i, int n_vocab) { return int32_t((int64_t(i) * 7919 + 17) % n_vocab); }
std::vector<int32_t> tokens(int n, int n_vocab, int offset) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) ids[size_t(i)] = token_at(i + offset, n_vocab);
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

// A parallel tg test's sequences each read the token stream from their own
// offset, so no two hold the same tokens.
constexpr int kSeqOffset = 1009;

// Every sequence of a parallel test filled to the test's depth, in passes of
// at most the runner's batch (untimed).
void fill_to_depth(BatchRunner& r, const BenchTest& t, std::vector<model::BatchEntry>& batch) {
  const int n_vocab = r.model().config().n_vocab, chunk = r.options().max_tokens;
  for (int seq = 0; seq < t.n_parallel; ++seq) {
    r.cache().clear(seq);
    for (int from = 0; from < t.depth; from += chunk) {
      batch.clear();
      for (int p = from; p < std::min(t.depth, from + chunk); ++p)
        batch.push_back({token_at(p + seq * kSeqOffset, n_vocab), p, seq, false});
      r.step(batch);
    }
  }
}

// run_once for a parallel tg test: n_gen passes of one token per sequence,
// each traced.
double run_parallel_once(BatchRunner& r, const BenchTest& t, Trace& trace, model::StageTimes* stage_times = nullptr) {
  const int n_vocab = r.model().config().n_vocab;
  std::vector<model::BatchEntry> batch;
  fill_to_depth(r, t, batch);
  trace.clear();
  r.collect_stage_times(stage_times);
  const auto t0 = Clock::now();
  for (int pos = t.depth; pos < t.depth + t.n_gen; ++pos) {
    batch.clear();
    for (int seq = 0; seq < t.n_parallel; ++seq)
      batch.push_back({token_at(pos + seq * kSeqOffset, n_vocab), pos, seq, true});
    const auto step0 = Clock::now();
    r.step(batch);
    trace.steps.push_back({Phase::Decode, t.n_parallel, pos, seconds_since(step0), false, t.n_parallel});
  }
  const double seconds = seconds_since(t0);
  r.collect_stage_times(nullptr);
  return seconds;
}

// Warm-up, the timed repetitions and (profile_stages) the profiled ones of
// one test: `once` runs a repetition and returns its timed seconds, leaving
// its passes in `trace`.
using Repetition = std::function<double(model::StageTimes*)>;
BenchResult measure(const model::Model& m, const BenchTest& t, int reps, const std::optional<perf::HwProfile>& profile,
                    bool profile_stages, const Repetition& once, const Trace& trace, double kv_elem_bytes) {
  // Warm-up: page in the weights, settle the clocks, wake the pool. One run
  // is not enough for short tests: right after the model is loaded, the
  // first timed pp32 repetitions of a process can run at half speed, ramping
  // up over several repetitions (`kvlab bench -p 32 -r 10` in fresh
  // processes shows it), which 10 repetitions do not average away. So it
  // lasts at least kWarmupSeconds.
  constexpr double kWarmupSeconds = 0.5;
  const auto warm0 = Clock::now();
  do once(nullptr);
  while (seconds_since(warm0) < kWarmupSeconds);
  BenchResult r;
  r.test = t;
  Trace all;
  const double n_timed = double(t.n_tokens()) * t.n_parallel;
  for (int i = 0; i < reps; ++i) {
    r.tok_s.push_back(n_timed / once(nullptr));
    all.steps.insert(all.steps.end(), trace.steps.begin(), trace.steps.end());
  }
  r.mean = std::accumulate(r.tok_s.begin(), r.tok_s.end(), 0.0) / reps;
  double var = 0;
  for (double x : r.tok_s) var += (x - r.mean) * (x - r.mean);
  r.stddev = reps > 1 ? std::sqrt(var / (reps - 1)) : 0;
  r.roofline = attribute(all, m, kv_elem_bytes, t.threads, profile);
  if (profile_stages) {
    model::StageTimes times;
    Trace profiled;
    for (int i = 0; i < reps; ++i) {
      once(&times);
      profiled.steps.insert(profiled.steps.end(), trace.steps.begin(), trace.steps.end());
    }
    r.stages = stage_profile(times, profiled, m, kv_elem_bytes);
  }
  return r;
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
  if (t.n_parallel < 1 || t.n_parallel > 1024) throw Error("parallel sequences must be in 1..1024");
  if (t.n_parallel > 1) {
    if (t.n_prompt > 0 || !t.kv_cache) throw Error(t.name() + ": parallel sequences are for tg tests with the KV cache");
    RunnerOptions o;
    o.n_seq = t.n_parallel;
    o.n_ctx = needed;
    o.n_threads = t.threads;
    o.max_tokens = std::max(t.n_parallel, std::min(t.max_batch, needed));
    o.kv_type = t.kv_type;
    BatchRunner runner(m, o);
    Trace trace;
    return measure(m, t, reps, profile, profile_stages,
                   [&](model::StageTimes* st) { return run_parallel_once(runner, t, trace, st); }, trace,
                   runner.cache().elem_bytes());
  }
  SessionOptions o;
  o.n_ctx = needed;
  o.n_threads = t.threads;
  o.kv_cache = t.kv_cache;
  o.kv_type = t.kv_type;
  o.max_batch = t.max_batch;
  Session s(m, o);
  return measure(m, t, reps, profile, profile_stages,
                 [&](model::StageTimes* st) { return run_once(s, t, m.config().n_vocab, st); }, s.trace(),
                 s.cache().elem_bytes());
}

}  // namespace kvlab::engine
