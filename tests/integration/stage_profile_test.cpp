// `kvlab bench --profile` (lab/bench/stage_profile.h): every op of the cost
// model is charged to exactly one stage, the stages' weight bytes are the
// file's, and the stage clock accounts for the passes it ran over.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/models.h"
#include "lab/bench/bench.h"
#include "lab/bench/stage_profile.h"

namespace kvlab {
namespace {

using model::kStageCount;
using model::Stage;

TEST(StageProfile, EveryCostOpBelongsToExactlyOneStage) {
  std::multiset<perf::Op> seen;
  for (size_t s = 0; s < kStageCount; ++s)
    for (perf::Op op : engine::stage_ops(Stage(s))) seen.insert(op);
  for (size_t op = 0; op < perf::kOpCount; ++op)
    EXPECT_EQ(seen.count(perf::Op(op)), 1u) << perf::op_name(perf::Op(op));
  EXPECT_EQ(seen.size(), perf::kOpCount);
}

TEST(StageProfile, WeightBytesAreTheFilesMatmulBytes) {
  for (const std::string& path : {test::kDefaultModel, test::kStories, test::kGemma3}) {
    const auto& w = test::load_model(path).model->weights();
    const auto bytes = engine::stage_weight_bytes(w);
    double sum = 0;
    for (double b : bytes) sum += b;
    EXPECT_EQ(sum, double(w.matmul_bytes())) << path;
    EXPECT_EQ(bytes[size_t(Stage::LmHead)], double(w.output.bytes() + 4 * w.output_norm.size())) << path;
    EXPECT_GT(bytes[size_t(Stage::GateUp)], bytes[size_t(Stage::Down)]) << path;  // two matrices of the same size
  }
}

// A profiled tg run of the default model, of one sequence and of four
// decoding together: each stage took time, the stages fit inside the traced
// passes and cover nearly all of them (what is left is the batch checks
// before the clock starts), and their FLOPs and KV bytes add up to the
// roofline attribution's for the same number of passes.
TEST(StageProfile, BenchStagesAccountForTheTracedPasses) {
  const auto& m = *test::load_model(test::kDefaultModel).model;
  for (int parallel : {1, 4}) {
    engine::BenchTest t;
    t.n_gen = 16;
    t.depth = 32;
    t.threads = 2;
    t.n_parallel = parallel;
    const engine::BenchResult r = engine::run_bench(m, t, 2, std::nullopt, true);
    ASSERT_TRUE(r.stages.has_value());
    const engine::StageProfile& p = *r.stages;
    EXPECT_EQ(p.passes, 2 * 16);
    double seconds = 0, flops = 0, kv = 0;
    for (size_t s = 0; s < kStageCount; ++s) {
      EXPECT_GT(p.stages[s].seconds, 0) << model::stage_name(Stage(s));
      seconds += p.stages[s].seconds;
      flops += p.stages[s].flops;
      kv += p.stages[s].kv_bytes;
    }
    EXPECT_LE(seconds, p.pass_seconds);
    EXPECT_GE(seconds, 0.9 * p.pass_seconds);
    // The timed repetitions and the profiled ones run the same passes.
    EXPECT_NEAR(flops / p.passes, r.roofline.decode.flops / r.roofline.decode.passes, 1e-9 * flops / p.passes)
        << parallel;
    EXPECT_NEAR(kv / p.passes, r.roofline.decode.kv_bytes / r.roofline.decode.passes, 1e-9 * kv / p.passes)
        << parallel;
    // Decode reads the cache in attention; Q, K and V write one position to it.
    EXPECT_GT(p.stages[size_t(Stage::Attention)].kv_bytes, p.stages[size_t(Stage::Qkv)].kv_bytes);
    EXPECT_GT(p.stages[size_t(Stage::Qkv)].kv_bytes, 0);
    EXPECT_EQ(p.stages[size_t(Stage::Activation)].weight_bytes, 0);
  }
}

TEST(StageProfile, OffUnlessAsked) {
  const auto& m = *test::load_model(test::kStories).model;
  engine::BenchTest t;
  t.n_prompt = 8;
  t.threads = 1;
  EXPECT_FALSE(engine::run_bench(m, t, 1, std::nullopt).stages.has_value());
}

}  // namespace
}  // namespace kvlab
