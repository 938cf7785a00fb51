// `kvlab bench`'s tests (engine/bench.h): what each kind of test times, pass
// by pass, and with what batch size, read back from the session's trace.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/models.h"
#include "engine/bench.h"

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
  // The timed span holds every traced pass, and nothing else but the loop.
  const double passes = (r.roofline.prefill.seconds + r.roofline.decode.seconds) / reps;
  for (double x : r.tok_s) {
    EXPECT_LE(x * passes, 12 * (1 + 1e-9));
    EXPECT_GT(x * passes, 12 * 0.5);
  }
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
