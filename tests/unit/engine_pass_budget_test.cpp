// The prefill chunk rule (engine::prefill_budget) on costs fed by hand: a
// pass with decode rows takes as many prompt tokens as the measured costs
// (engine::PassCosts) fit in its time target.
#include <gtest/gtest.h>

#include "engine/pass_costs.h"
#include "engine/scheduler.h"

namespace kvlab::engine {
namespace {

SchedulerOptions with_target(double ms) {
  SchedulerOptions o;
  o.prefill_chunk = 128;
  o.pass_target_ms = ms;
  return o;
}

// Decode-only passes of 10 ms, then a pass of 8 decode rows and 20 prompt
// tokens in 20 ms: a prompt token costs 0.5 ms.
PassCosts measured() {
  PassCosts c;
  c.observe(8, 0, 10);
  c.observe(8, 20, 20);
  return c;
}

TEST(PassCosts, AMixedPassChargesThePromptWhatDecodeAloneWouldNotTake) {
  const PassCosts c = measured();
  EXPECT_DOUBLE_EQ(c.decode_ms(), 10);
  EXPECT_DOUBLE_EQ(c.prefill_token_ms(), 0.5);
  PassCosts fresh;
  fresh.observe(8, 20, 20);  // nothing to compare it with: no estimate
  EXPECT_FALSE(fresh.decode_known());
  EXPECT_FALSE(fresh.prefill_known());
  fresh.observe(0, 100, 40);  // a prefill-only pass: its time per token
  EXPECT_DOUBLE_EQ(fresh.prefill_token_ms(), 0.4);
}

TEST(PassCosts, OnePassMovesTheEstimateByAQuarter) {
  PassCosts c = measured();
  c.observe(8, 0, 30);
  EXPECT_DOUBLE_EQ(c.decode_ms(), 15);
}

TEST(PrefillBudget, FillsThePassUpToItsTarget) {
  const PassCosts c = measured();
  EXPECT_EQ(prefill_budget(with_target(-1), c, 8), 20);   // auto: 2 x 10 ms, 10 ms of prompt
  EXPECT_EQ(prefill_budget(with_target(40), c, 8), 60);   // (40 - 10) / 0.5
  EXPECT_EQ(prefill_budget(with_target(500), c, 8), 128);  // never past --prefill-chunk
  EXPECT_EQ(prefill_budget(with_target(11), c, 8), kMinPrefillChunk);  // the prompt still advances
}

TEST(PrefillBudget, TheWholeChunkWithoutStreamsToProtectOrCosts) {
  const PassCosts c = measured();
  EXPECT_EQ(prefill_budget(with_target(0), c, 8), 128);  // off: the fixed chunk
  EXPECT_EQ(prefill_budget(with_target(-1), c, 0), 128);  // nothing decodes
  EXPECT_EQ(prefill_budget(with_target(-1), PassCosts{}, 8), 128);  // no decode pass measured yet
  PassCosts decode_only;
  decode_only.observe(8, 0, 10);
  EXPECT_EQ(prefill_budget(with_target(-1), decode_only, 8), kMinPrefillChunk);  // a small chunk measures a token
}

TEST(PrefillBudget, ShrinksAsDecodeRowsSlowThePass) {
  // A fixed 40 ms target: one stream's 5 ms passes leave room for 70
  // tokens; sixteen streams' 30 ms passes, for 20.
  PassCosts c;
  c.observe(1, 0, 5);
  c.observe(1, 10, 10);
  EXPECT_EQ(prefill_budget(with_target(40), c, 1), 70);
  for (int i = 0; i < 40; ++i) c.observe(16, 0, 30);
  EXPECT_EQ(prefill_budget(with_target(40), c, 16), 20);
}

}  // namespace
}  // namespace kvlab::engine
