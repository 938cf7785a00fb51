// `kvlab bench`'s tests (lab/bench/bench.h): what each kind of test times, pass
// by pass, and with what batch size, read back from the session's trace.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/models.h"
#include "lab/bench/bench.h"
#include "lab/hardware/hw_profile.h"

namespace kvlab {
namespace {

// --pg: the prompt in passes of --ub tokens, then one decode step per
// generated token, all timed together; tok/s counts both.
TEST(Bench, PromptThenGenerationInBatchesOfUb) {
  const auto& m = *test::load_model(test::kStories).model;
  engine::BenchTest t;
  t.n_prompt = 8;
  t.n_gen = 4;
  t.depth = 5;
  t.max_batch = 3;
  t.threads = 1;
  EXPECT_EQ(t.name(), "pp8+tg4 @ d5");
  const int reps = 2;
  const engine::BenchResult r = engine::run_bench(m, t, reps, std::nullopt);
  ASSERT_EQ(r.tok_s.size(), size_t(reps));
  EXPECT_EQ(r.roofline.prefill.passes, 3 * reps);  // 3 + 3 + 2 tokens
  EXPECT_EQ(r.roofline.prefill.tokens, 8 * reps);
  EXPECT_EQ(r.roofline.decode.passes, 4 * reps);
  // The timed spans (12 tokens each) hold every traced pass, and little else.
  const double passes = r.roofline.prefill.seconds + r.roofline.decode.seconds;
  double timed = 0;
  for (double x : r.tok_s) timed += 12 / x;
  EXPECT_GE(timed, passes * (1 - 1e-9));
  EXPECT_GT(passes, 0.5 * timed);
  // A prompt test alone, the same batch size: the same prefill passes.
  t.n_gen = 0;
  EXPECT_EQ(engine::run_bench(m, t, 1, std::nullopt).roofline.prefill.passes, 3);
  t.max_batch = 8;
  EXPECT_EQ(engine::run_bench(m, t, 1, std::nullopt).roofline.prefill.passes, 1);
  // From an empty cache the generation's first token is a one-token prefill.
  t.n_prompt = 0;
  t.n_gen = 4;
  t.depth = 0;
  const engine::BenchResult g = engine::run_bench(m, t, 1, std::nullopt);
  EXPECT_EQ(g.roofline.prefill.passes, 1);
  EXPECT_EQ(g.roofline.decode.passes, 3);
}

// --parallel N: each timed pass carries one token of each of N sequences,
// every one at the test's depth; tok/s counts all N sequences' tokens, and a
// step's KV reads are N sequences' while its weight reads stay one pass's.
TEST(Bench, ParallelTgStepsEverySequenceOncePerPass) {
  const auto& m = *test::load_model(test::kStories).model;
  engine::BenchTest t;
  t.n_gen = 4;
  t.depth = 5;
  t.threads = 1;
  t.n_parallel = 3;
  EXPECT_EQ(t.name(), "tg4 x3 @ d5");
  const int reps = 2;
  const engine::BenchResult r = engine::run_bench(m, t, reps, std::nullopt);
  EXPECT_EQ(r.roofline.prefill.passes, 0);
  EXPECT_EQ(r.roofline.decode.passes, 4 * reps);
  EXPECT_EQ(r.roofline.decode.tokens, 12 * reps);
  double timed = 0;
  for (double x : r.tok_s) timed += 12 / x;
  EXPECT_GE(timed, r.roofline.decode.seconds * (1 - 1e-9));
  EXPECT_GT(r.roofline.decode.seconds, 0.5 * timed);
  const engine::PhaseWork one = engine::pass_work(m, 1, 5, 2.0), three = engine::pass_work(m, 3, 5, 2.0, false, 3);
  EXPECT_EQ(three.weight_bytes, one.weight_bytes);
  EXPECT_DOUBLE_EQ(three.kv_bytes, 3 * one.kv_bytes);
  EXPECT_DOUBLE_EQ(three.flops, 3 * one.flops);
}

TEST(Bench, ParallelSequencesAreForCachedTgTests) {
  const auto& m = *test::load_model(test::kStories).model;
  engine::BenchTest t;
  t.n_prompt = 8;
  t.n_parallel = 2;
  try {
    engine::run_bench(m, t, 1, std::nullopt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "pp8 x2: parallel sequences are for tg tests with the KV cache");
  }
  t.n_prompt = 0;
  t.n_gen = 4;
  t.kv_cache = false;
  EXPECT_THROW(engine::run_bench(m, t, 1, std::nullopt), Error);
  t.kv_cache = true;
  t.n_parallel = 0;
  EXPECT_THROW(engine::run_bench(m, t, 1, std::nullopt), Error);
}

// The roofline divides by the probe's point for the test's thread count (the
// fastest at or below it), its best window and its sustained figure alike.
perf::HwProfile two_thread_profile() {
  perf::HwProfile hw;
  hw.threads = 2;
  hw.mem_read_bw = {{1, 2e10, 1.5e10}, {2, 3e10, 2.5e10}};
  hw.peak_fp32_flops = 1e11;
  hw.peak_int8_ops = 4e11;
  return hw;
}

TEST(Bench, RooflineUsesTheProbePointOfItsThreadCount) {
  const auto& m = *test::load_model(test::kStories).model;
  const perf::HwProfile hw = two_thread_profile();
  engine::BenchTest t;
  t.n_gen = 4;
  t.depth = 4;
  for (int threads : {1, 2, 3}) {
    t.threads = threads;
    const engine::Attribution a = engine::run_bench(m, t, 1, hw).roofline;
    ASSERT_TRUE(a.peaks && a.decode_verdict);
    const size_t at = threads == 1 ? 0 : 1;
    EXPECT_EQ(a.peaks->bytes_per_s, hw.mem_read_bw[at].bytes_per_s) << threads;
    EXPECT_EQ(a.peaks->sustained_bytes_per_s, hw.mem_read_bw[at].sustained_bytes_per_s) << threads;
    const double achieved = a.decode.bytes() / a.decode.seconds;
    EXPECT_NEAR(a.decode_verdict->bw_utilization, achieved / a.peaks->bytes_per_s, 1e-9);
  }
}

// With the probe's working-set curve, decode is also put against the read
// rate for its own bytes: stories260K's step reads well under a megabyte,
// below the curve's first point, so the curve's 90 GB/s, times 1 thread's
// share (2/3) of the 2-thread rate; a profile without the curve gives none.
TEST(Bench, DecodeIsPutAgainstTheReadRateOfItsWorkingSet) {
  const auto& m = *test::load_model(test::kStories).model;
  perf::HwProfile hw = two_thread_profile();
  engine::BenchTest t;
  t.n_gen = 4;
  t.depth = 4;
  t.threads = 1;
  EXPECT_EQ(engine::run_bench(m, t, 1, hw).roofline.peaks->working_set_bytes_per_s, 0);
  hw.read_bw_by_size = {{8 << 20, 9e10}, {1 << 30, 3e10}};
  const engine::Attribution a = engine::run_bench(m, t, 1, hw).roofline;
  ASSERT_TRUE(a.peaks);
  EXPECT_LT(a.decode_bytes_per_step(), 8 << 20);
  EXPECT_DOUBLE_EQ(a.peaks->working_set_bytes_per_s, 3 * hw.mem_read_bw[0].bytes_per_s);
  // With every thread, the curve's own figure, even when its DRAM end (a
  // separate run of the probe) came out below the best window's.
  hw.read_bw_by_size.back().bytes_per_s = 2.5e10;
  t.threads = 2;
  EXPECT_DOUBLE_EQ(engine::run_bench(m, t, 1, hw).roofline.peaks->working_set_bytes_per_s, 9e10);
}

TEST(Bench, RejectsAnEmptyTestAndAContextOverflow) {
  const auto& m = *test::load_model(test::kStories).model;
  engine::BenchTest t;
  EXPECT_THROW(engine::run_bench(m, t, 1, std::nullopt), Error);
  t.n_prompt = 2000;
  t.n_gen = 100;
  try {
    engine::run_bench(m, t, 1, std::nullopt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "pp2000+tg100 needs 2100 positions; the model's context is 2048");
  }
}

}  // namespace
}  // namespace kvlab
