// kvlab simulate --serve: a discrete-event model of `kvlab serve` under a
// load (lab/simulate/serve_load.h). It replays the engine's policy
// (engine/scheduler.h, engine/serving_engine.cpp), sharing its options and
// rules where they are functions (SchedulerOptions, checked(),
// admission_budget(), queue_has_room(), prefill_budget() with PassCosts,
// BlockManager::max_reused_blocks()):
//  - one engine thread loops admit → plan a pass → run it → sample;
//  - a request queues unless waiting + incoming exceeds max_queue beyond the
//    free slots (then it is rejected);
//  - the queue's head is admitted into a free slot when the KV pool has
//    blocks for its whole budget (prompt + max_tokens, capped by the
//    context), less the shared-prefix blocks the cache holds; nothing
//    overtakes it;
//  - each pass has a decode row per decoding sequence, then prompt chunks,
//    prefill_budget() tokens in all (at most prefill_chunk, fewer to keep a
//    pass with decode rows near --pass-target-ms by the simulated passes'
//    times), in slot order;
//  - with --draft N, a decode row finds drafts with the load's draft_found
//    chance, and then carries min(N, tokens still wanted - 1, context left
//    - 1) of them (Scheduler::add_decode_rows); each is kept with the load's
//    draft_accept chance while the ones before it were, drawn from the
//    seed, and only the kept drafts and the row's own token are sampled;
//  - tokens come out at the end of the pass that samples them, a request's
//    in one chunk (inter-token latency is the gap between chunks); a request
//    ends after its output tokens (ignore_eos, as benchmarks run).
// Events are arrivals and pass completions, in time order (ties in the order
// they were scheduled), so a seed gives one result. A pass's time is the
// caller's (a perf model, or a fixed function in tests) plus fixed costs per
// pass and per sampled row.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "engine/scheduler.h"
#include "lab/simulate/serve_load.h"
#include "lab/simulate/serve_pass.h"

namespace kvlab::perf {

// Costs of the engine outside the forward pass: per pass (planning, the
// batch's bookkeeping) and per sampled row (the sampler over the vocabulary,
// detokenising, handing the text to the client).
struct ServeOverhead {
  double pass_s = 0;
  double sampled_row_s = 0;
  // The engine samples a pass's rows in parallel over its thread pool
  // (ServingEngine::sample_rows): ceil(rows / threads) rows' time.
  int sampler_threads = 1;
};

struct ServeOptions {
  engine::SchedulerOptions sched;  // checked() by simulate_serve
  ServeLoad load;
  ServeOverhead overhead;
  int series_points = 20;  // rows of the time series
};

struct Percentiles {
  double p50 = 0, p90 = 0, p99 = 0;
  // Where the samples fall in two groups of about equal size (inter-token
  // gaps of decode-only passes and of passes that carry a prompt's chunk),
  // p50 sits between them and jumps from one to the other as the mix moves
  // by a few percent; the mean moves with the mix.
  double mean = 0;
};

// The engine's state at one moment.
struct ServeSample {
  double t_s = 0;
  int running = 0, waiting = 0;
  int kv_blocks_used = 0;
};

struct ServeResult {
  int64_t completed = 0, rejected = 0;
  int64_t passes = 0;
  int64_t prompt_tokens = 0, output_tokens = 0, cached_tokens = 0;
  // Decode rows run (one per decoding request and pass), the drafts they
  // carried and the drafts kept: a decode row yields 1 + kept / steps tokens.
  int64_t decode_steps = 0, drafted = 0, drafts_kept = 0;
  int kv_blocks = 0;      // the pool
  double duration_s = 0;  // first arrival to last token
  Percentiles ttft_ms, itl_ms, e2e_ms;
  // Per request, (last token - first token) / (tokens - 1): unlike the gaps
  // between chunks, it counts every token, however a pass's tokens are
  // chunked (vLLM's benchmarks call it TPOT).
  Percentiles tpot_ms;
  double throughput_tok_s = 0;  // output tokens / duration
  double requests_per_s = 0;    // completed / duration
  double mean_in_system = 0;    // time-averaged requests in the engine (queued + running)
  int max_waiting = 0, max_kv_blocks_used = 0;
  std::vector<ServeSample> series;
};

// Seconds one pass of these rows takes.
using PassPricer = std::function<double(const PassRows&)>;

// Throws kvlab::Error for bad options or a load no request of which fits the
// context.
ServeResult simulate_serve(const ServeOptions& o, const PassPricer& price);

}  // namespace kvlab::perf
