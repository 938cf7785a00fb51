// kvlab simulate --serve's discrete-event model (lab/simulate/serve_sim.h)
// on hand-computable cases: a pass priced at 1 ms + 0.1 ms per token, so
// every latency follows from counting the passes the scheduler plans.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "engine/scheduler.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/parallel.h"
#include "lab/simulate/serve_pass.h"
#include "lab/simulate/serve_sim.h"
#include "lab/simulate/simulate.h"

namespace kvlab::perf {
namespace {

double fixed_price(const PassRows& rows) { return 1e-3 + 1e-4 * rows.tokens(); }

ServeOptions closed_loop(int clients, int64_t requests, int prompt, int output) {
  ServeOptions o;
  o.sched.n_seq = 4;
  o.sched.n_ctx = 1024;
  o.sched.n_threads = 1;
  o.sched.prefill_chunk = 128;
  o.load.concurrency = clients;
  o.load.requests = requests;
  o.load.prompt = {prompt, prompt};
  o.load.output = {output, output};
  return o;
}

// The histogram keeps percentiles within 0.1%.
void expect_ms(double got_ms, double want_ms) { EXPECT_NEAR(got_ms, want_ms, want_ms * 2e-3); }

TEST(ServeSim, OneRequestTtftIsItsPrefillPasses) {
  // 300 prompt tokens in chunks of 128, 128, 44; then 2 decode passes.
  const ServeResult r = simulate_serve(closed_loop(1, 1, 300, 3), fixed_price);
  const double prefill_ms = (1 + 12.8) + (1 + 12.8) + (1 + 4.4);
  expect_ms(r.ttft_ms.p50, prefill_ms);
  expect_ms(r.itl_ms.p50, 1.1);
  expect_ms(r.e2e_ms.p50, prefill_ms + 2 * 1.1);
  // The means are of the samples themselves, not of the histogram's buckets.
  EXPECT_NEAR(r.ttft_ms.mean, prefill_ms, 1e-9);
  EXPECT_NEAR(r.itl_ms.mean, 1.1, 1e-9);
  EXPECT_EQ(r.passes, 5);
  EXPECT_EQ(r.output_tokens, 3);
  expect_ms(r.tpot_ms.p50, 1.1);
}

TEST(ServeSim, EngineOverheadsAddPerPassAndPerSamplingRound) {
  ServeOptions o = closed_loop(1, 1, 300, 3);
  o.overhead = {0.5e-3, 0.2e-3, 2};
  ServeResult r = simulate_serve(o, fixed_price);
  expect_ms(r.ttft_ms.p50, 33 + 3 * 0.5 + 0.2);  // three passes, one sampled row
  expect_ms(r.itl_ms.p50, 1.1 + 0.5 + 0.2);
  // Four rows on two threads: two rows' time per decode pass.
  o = closed_loop(4, 4, 16, 4);
  o.overhead = {0.5e-3, 0.2e-3, 2};
  r = simulate_serve(o, fixed_price);
  expect_ms(r.itl_ms.p50, 1.4 + 0.5 + 2 * 0.2);
}

TEST(ServeSim, ConcurrencyOneRunsRequestsOneAfterAnother) {
  const ServeResult one = simulate_serve(closed_loop(1, 1, 100, 10), fixed_price);
  const ServeResult five = simulate_serve(closed_loop(1, 5, 100, 10), fixed_price);
  EXPECT_EQ(five.completed, 5);
  EXPECT_NEAR(five.duration_s, 5 * one.duration_s, 1e-9);
  expect_ms(five.e2e_ms.p99, one.e2e_ms.p50);
  EXPECT_NEAR(five.throughput_tok_s, one.throughput_tok_s, 1e-6);
}

TEST(ServeSim, QueueLimitRejectsBeyondTheFreeSlots) {
  // One slot, a queue of 2, ten requests arriving within microseconds of
  // each other while the first pass (>= 1 ms) runs: one runs, two wait.
  ServeOptions o = closed_loop(1, 10, 64, 8);
  o.sched.n_seq = 1;
  o.sched.max_queue = 2;
  o.load.concurrency = 0;
  o.load.rate = 1e6;
  const ServeResult r = simulate_serve(o, fixed_price);
  EXPECT_EQ(r.completed, 3);
  EXPECT_EQ(r.rejected, 7);
  EXPECT_EQ(r.max_waiting, 2);
}

TEST(ServeSim, TimeSeriesIsEvenlySpacedInTime) {
  // 5 prefill passes (4 x 13.8 ms, 9.8 ms), then 99 decode passes of 1.1 ms:
  // spaced by pass, most rows would fall in the decode tail.
  ServeOptions o = closed_loop(1, 1, 600, 100);
  o.series_points = 11;
  const ServeResult r = simulate_serve(o, fixed_price);
  ASSERT_EQ(r.series.size(), 11u);
  const double step = r.series[1].t_s - r.series[0].t_s;
  for (size_t i = 1; i < r.series.size(); ++i) EXPECT_NEAR(r.series[i].t_s - r.series[i - 1].t_s, step, 1e-9);
  // From the first pass's start to the last's.
  EXPECT_NEAR(step * 10, 4 * 13.8e-3 + 9.8e-3 + 98 * 1.1e-3, 1e-9);
  for (const ServeSample& x : r.series) EXPECT_EQ(x.running, 1);
}

TEST(ServeSim, SmallKvPoolAdmitsOneRequestAtATime) {
  // Budget 32 + 32 = 64 positions = 4 blocks each; the pool holds 4 blocks.
  ServeOptions o = closed_loop(4, 4, 32, 32);
  o.sched.n_ctx = 64;
  o.sched.kv_blocks = 4;
  const ServeResult r = simulate_serve(o, fixed_price);
  const ServeResult alone = simulate_serve(closed_loop(1, 1, 32, 32), fixed_price);
  EXPECT_EQ(r.completed, 4);
  EXPECT_EQ(r.max_kv_blocks_used, 4);
  for (const ServeSample& s : r.series) EXPECT_LE(s.running, 1);
  EXPECT_NEAR(r.duration_s, 4 * alone.duration_s, 1e-9);
  // With blocks for all four they run together, in well under 4x the time.
  o.sched.kv_blocks = 16;
  EXPECT_LT(simulate_serve(o, fixed_price).duration_s, 2 * alone.duration_s);
}

TEST(ServeSim, RampedClientsFallOutOfStep) {
  // Four clients of fixed lengths started together stay in step: each
  // round's 128-token prompts arrive together and most of them wait for a
  // pass of the others' prompts (up to 512 tokens a pass), then all end in
  // one pass, and their successors arrive together again.
  ServeOptions o = closed_loop(4, 40, 128, 32);
  o.sched.prefill_chunk = 512;
  o.sched.pass_target_ms = 0;  // whole prompts in a pass, as vLLM's token budget plans them
  const ServeResult together = simulate_serve(o, fixed_price);
  // Started over about one request's duration, they stay apart: a
  // successor arrives as its predecessor's last pass ends, waits for the
  // others' next decode pass (3 rows), then has a pass of its own 128
  // tokens beside their 3 decode rows.
  o.load.ramp_s = together.e2e_ms.p50 * 1e-3;
  const ServeResult ramped = simulate_serve(o, fixed_price);
  expect_ms(ramped.ttft_ms.p50, (1 + 0.3) + (1 + 13.1));
  EXPECT_GT(together.ttft_ms.p50, 3 * ramped.ttft_ms.p50);
  EXPECT_EQ(ramped.completed, 40);
  EXPECT_NEAR(ramped.throughput_tok_s, together.throughput_tok_s, 0.15 * together.throughput_tok_s);
  o.load.ramp_s = -1;
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  o.load.ramp_s = 1;
  o.load.concurrency = 0;
  o.load.rate = 10;
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);  // an open loop has no clients to spread
}

TEST(ServeSim, SharedPrefixIsServedFromTheCache) {
  // 256 shared tokens = 16 blocks; after the first request each reuses them.
  ServeOptions o = closed_loop(1, 4, 300, 4);
  o.load.prefix_share = 1;
  o.load.prefix_tokens = 256;
  const ServeResult r = simulate_serve(o, fixed_price);
  EXPECT_EQ(r.cached_tokens, 3 * 256);
  expect_ms(r.ttft_ms.p99, (1 + 12.8) + (1 + 12.8) + (1 + 4.4));  // the first, cold
  expect_ms(r.ttft_ms.p50, 1 + 4.4);                               // 44 tokens left to compute
}

TEST(ServeSim, SameSeedSameResultOtherSeedOther) {
  ServeOptions o = closed_loop(0, 300, 64, 16);
  o.load.rate = 40;
  o.load.prompt = {16, 256};
  const ServeResult a = simulate_serve(o, fixed_price), b = simulate_serve(o, fixed_price);
  EXPECT_EQ(a.ttft_ms.p90, b.ttft_ms.p90);
  EXPECT_EQ(a.duration_s, b.duration_s);
  EXPECT_EQ(a.passes, b.passes);
  o.load.seed = 2;
  EXPECT_NE(simulate_serve(o, fixed_price).duration_s, a.duration_s);
}

TEST(ServeSim, LittlesLawHoldsAtSteadyState) {
  // L = lambda W: requests in the system on average = throughput x mean latency.
  ServeOptions o = closed_loop(0, 2000, 64, 16);
  o.load.rate = 30;
  const ServeResult r = simulate_serve(o, fixed_price);
  ASSERT_EQ(r.completed, 2000);
  EXPECT_NEAR(r.mean_in_system, r.requests_per_s * r.e2e_ms.mean / 1e3, 0.01 * r.mean_in_system);
  // An open loop below saturation completes requests at the offered rate.
  EXPECT_NEAR(r.requests_per_s, 30, 3);
}

TEST(ServeSim, BadLoadsAreClearErrors) {
  ServeOptions o = closed_loop(1, 1, 64, 8);
  o.load.concurrency = 0;
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);  // neither a rate nor clients
  o.load.rate = -1;
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  o = closed_loop(1, kMaxServeRequests + 1, 64, 8);
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  o = closed_loop(1, kMaxServeRequests, 64, 1024);  // too many passes to run
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  o = closed_loop(1, 1, 1024, 8);  // no room in the context for an answer
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  o = closed_loop(1, 1, 64, 8);
  o.load.draft_accept = 1.5;
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  o.load.draft_accept = 0.5;
  o.load.draft_found = -0.1;
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  o.load.draft_found = 1;
  o.load.draft_accept = 0.5;
  o.sched.draft.max_tokens = engine::kMaxDraftTokens + 1;
  EXPECT_THROW(simulate_serve(o, fixed_price), Error);
  EXPECT_THROW(parse_length("0", "--prompt-len"), Error);
  EXPECT_THROW(parse_length("9:3", "--prompt-len"), Error);
  EXPECT_THROW(parse_length("12x", "--prompt-len"), Error);
  const LengthSpec l = parse_length("128:1024", "--prompt-len");
  EXPECT_EQ(l.lo, 128);
  EXPECT_EQ(l.hi, 1024);
}

TEST(ServeSim, KeptDraftsArriveWithTheirPassesToken) {
  // 8 tokens, up to 3 drafts, every draft kept: the prefill gives the first
  // token; a pass of 1 + 3 rows gives 4 (the drafts the 6 tokens still
  // wanted after its own allow); then 1 + 2 rows give the last 3.
  ServeOptions o = closed_loop(1, 1, 16, 8);
  o.sched.draft.max_tokens = 3;
  o.load.draft_accept = 1;
  const ServeResult r = simulate_serve(o, fixed_price);
  EXPECT_EQ(r.passes, 3);
  EXPECT_EQ(r.output_tokens, 8);
  EXPECT_EQ(r.decode_steps, 2);
  EXPECT_EQ(r.drafted, 5);
  EXPECT_EQ(r.drafts_kept, 5);
  expect_ms(r.ttft_ms.p50, 2.6);
  expect_ms(r.e2e_ms.p50, 2.6 + 1.4 + 1.3);
  // A pass's tokens reach the client as one chunk: two gaps, 1.4 and 1.3 ms.
  expect_ms(r.itl_ms.p50, 1.3);
  expect_ms(r.itl_ms.p99, 1.4);
  EXPECT_NEAR(r.itl_ms.mean, 1.35, 1e-9);
  // Time per output token counts all seven tokens after the first.
  EXPECT_NEAR(r.tpot_ms.mean, 2.7 / 7, 1e-9);
}

TEST(ServeSim, RejectedDraftsStillCostTheirRows) {
  // 4 tokens, up to 3 drafts, none kept: passes of 1 + 2, 1 + 1 and 1 rows.
  ServeOptions o = closed_loop(1, 1, 16, 4);
  o.sched.draft.max_tokens = 3;
  const ServeResult r = simulate_serve(o, fixed_price);
  EXPECT_EQ(r.passes, 4);
  EXPECT_EQ(r.drafted, 3);
  EXPECT_EQ(r.drafts_kept, 0);
  expect_ms(r.e2e_ms.p50, 2.6 + 1.3 + 1.2 + 1.1);
}

TEST(ServeSim, DraftsYieldLeviathansTokensPerRow) {
  // Each of 4 drafts kept with chance a while those before were: a decode
  // row yields (1 - a^5) / (1 - a) tokens on average (the last rows of a
  // request, with fewer drafts, pull it down by well under 1%).
  ServeOptions o = closed_loop(4, 40, 16, 1000);
  o.sched.n_ctx = 2048;
  o.sched.draft.max_tokens = 4;
  o.load.draft_accept = 0.6;
  const ServeResult r = simulate_serve(o, fixed_price);
  const double per_row = 1 + double(r.drafts_kept) / double(r.decode_steps);
  EXPECT_NEAR(per_row, (1 - std::pow(0.6, 5)) / 0.4, 0.02);
  EXPECT_EQ(r.output_tokens, 40 * 1000);
  // The drafts have a stream of their own: the same seed, the same outcome.
  EXPECT_EQ(simulate_serve(o, fixed_price).drafts_kept, r.drafts_kept);
}

TEST(ServeSim, RowsWithoutAPromptLookupMatchCarryNoDrafts) {
  ServeOptions o = closed_loop(4, 40, 16, 1000);
  o.sched.n_ctx = 2048;
  o.sched.draft.max_tokens = 4;
  o.load.draft_accept = 1;
  o.load.draft_found = 0.5;  // half the rows draft 4 tokens, all kept: 3 tokens per row
  ServeResult r = simulate_serve(o, fixed_price);
  EXPECT_NEAR(double(r.drafted) / double(r.decode_steps), 2.0, 0.05);
  EXPECT_NEAR(1 + double(r.drafts_kept) / double(r.decode_steps), 3.0, 0.05);
  o.load.draft_found = 0;  // never a match: the passes of plain decoding
  r = simulate_serve(o, fixed_price);
  EXPECT_EQ(r.drafted, 0);
  o.sched.draft.max_tokens = 0;
  EXPECT_EQ(simulate_serve(o, fixed_price).passes, r.passes);
}

TEST(ServeSim, EngineRulesTheSimulatorShares) {
  engine::SchedulerOptions o;
  o.n_seq = 2;
  o.n_ctx = 100;
  o.max_queue = 3;
  EXPECT_EQ(engine::admission_budget(o, 30, 50), 80);
  EXPECT_EQ(engine::admission_budget(o, 30, 500), 100);  // capped by the context
  EXPECT_TRUE(engine::queue_has_room(o, 4, 1, 0));       // 3 queued + 2 free slots
  EXPECT_FALSE(engine::queue_has_room(o, 5, 1, 0));
  EXPECT_FALSE(engine::queue_has_room(o, 3, 1, 2));
}

TEST(ServeSim, PassTargetCutsTheChunksThatDelayStreams) {
  // Four clients, prompts of 16 to 1000 tokens: new prompts keep arriving
  // while the others decode. A decode pass of 4 rows takes 1.4 ms; a fixed
  // 128-token chunk adds 12.8 ms to the streams' wait, the auto target
  // (2 x 1.4 ms) about kMinPrefillChunk tokens' 1.6 ms.
  ServeOptions o = closed_loop(4, 40, 16, 64);
  o.load.prompt = {16, 1000};
  o.sched.pass_target_ms = 0;
  const ServeResult fixed = simulate_serve(o, fixed_price);
  o.sched.pass_target_ms = -1;
  const ServeResult aimed = simulate_serve(o, fixed_price);
  o.sched.pass_target_ms = 5;
  const ServeResult five = simulate_serve(o, fixed_price);
  EXPECT_GT(fixed.itl_ms.p99, 13.0);
  EXPECT_LT(aimed.itl_ms.p99, 3.2);
  // Within 10%: the decode-only estimate lags a pass behind when a stream
  // starts or ends.
  EXPECT_LT(five.itl_ms.p99, 5.5);
  EXPECT_GT(five.itl_ms.p99, 4.0);  // the target is used, not undershot
  // What the streams gain, prompts pay: more passes before the first token.
  EXPECT_GT(aimed.ttft_ms.p50, fixed.ttft_ms.p50);
  EXPECT_EQ(aimed.completed, 40);
}

TEST(ServePass, DecodeRowsCostOneBatchedPass) {
  // Weights are read once per pass: four decode rows at one position are
  // the batch-of-4 pass simulate prices.
  const model::Config c = resolve_model("llama-3.1-8b").config;
  const Machine m = make_machine(find_hardware("h100"), Precision::BF16, Efficiency{});
  PassRows rows;
  rows.decode_positions = {700, 700, 700, 700};
  Pass batched;
  batched.batch = 4;
  batched.past = 700;
  const double want = time_pass(c, batched, m).seconds;
  EXPECT_NEAR(time_serve_pass(c, Pass{}, rows, m, Layout{}).seconds, want, want * 1e-12);
  // Over two tensor-parallel H100s: one device's shard plus the links, as simulate prices it.
  const Layout tp2 = make_layout(2, 1, "", find_hardware("h100"));
  const double want_tp2 = time_layout_pass(c, batched, m, tp2).seconds;
  EXPECT_NEAR(time_serve_pass(c, Pass{}, rows, m, tp2).seconds, want_tp2, want_tp2 * 1e-12);
  EXPECT_LT(want_tp2, want);
  // A prefill chunk alongside adds its tokens' work but no second weight read.
  rows.chunks.push_back({0, 128, true});
  Pass chunk;
  chunk.new_tokens = 128;
  const double both = time_serve_pass(c, Pass{}, rows, m, Layout{}).seconds;
  EXPECT_GT(both, want);
  EXPECT_LT(both, want + time_pass(c, chunk, m).seconds);
}

}  // namespace
}  // namespace kvlab::perf
