// Grading free-text diagnoses of the seed's case (decode, memory bandwidth,
// faster memory), right and wrong, and of a prefill/compute case.
#include <gtest/gtest.h>

#include "lab/diagnose/grade.h"
#include "lab/report/report.h"
#include "lab/simulate/model_catalog.h"

namespace kvlab::perf {
namespace {

Expected seed_case() {
  DiagnoseOptions in;
  in.model = resolve_model(in.model_id).config;  // defaults: 8B, TTFT 50 ms, 2 tok/s
  return expected_from(diagnose(in));
}

struct Case {
  const char* answer;
  Mark phase, resource, upgrade;
};

constexpr Mark R = Mark::Right, P = Mark::Partial, W = Mark::Wrong, M = Mark::Missing;

// clang-format off
const Case kSeedCases[] = {
  // Right on all three points, phrased many ways.
  {"The decode phase is memory-bandwidth bound; upgrade to a GPU with faster VRAM/HBM.", R, R, R},
  {"Decode is the bottleneck. It's memory bound, not compute bound, so more TFLOPS won't help; get more memory bandwidth.", R, R, R},
  {"TTFT of 50ms is fine but generation at 2 tok/s is terrible: decode is bandwidth-limited, needs faster memory.", R, R, R},
  {"The GPU cores sit idle waiting for weights to load from VRAM during decoding; you need higher memory throughput rather than more compute.", R, R, R},
  {"Prefill is fine. Decode is slow because it's memory-bound. Upgrade to HBM.", R, R, R},
  {"Token generation is the bottleneck since every token needs to stream the full weights from memory, so a card with more memory bandwidth (e.g. H100 HBM3) would help, while extra FLOPS wouldn't.", R, R, R},
  {"The decode phase, memory-bound; fix: keep the whole model in VRAM instead of offloading to CPU RAM", R, R, R},
  {"Decode. It's bandwidth-bound, so a faster GPU with more TFLOPS won't fix it, you need faster memory like HBM3e.", R, R, R},
  {"The slow part is generating tokens one at a time: each step is limited by how fast the weights can be read from VRAM (memory-bandwidth-bound). More VRAM bandwidth helps, more FLOPS doesn't.", R, R, R},
  {"The decode isn't compute-bound, it's limited by memory bandwidth. Compute isn't the problem. Buy faster memory.", R, R, R},
  {"Time to first token is great. Output tokens are slow: the model is being offloaded to system RAM, put all layers on the GPU.", R, R, R},
  {"Decode phase. Memory bandwidth bound. No amount of TFLOPS will help; you need faster VRAM throughput.", R, R, R},
  // Partly right.
  {"Decoding. Memory bandwidth.", R, R, M},
  {"decode phase; more VRAM", R, R, P},
  {"decode is memory bound and compute bound", R, P, M},
  {"Generation phase; upgrade the GPU.", R, M, M},
  {"Prefill phase is struggling because it's memory bound; get faster memory", W, R, R},
  {"Both prefill and decode are slow; it's memory-bandwidth bound, so get HBM.", P, R, R},
  // Wrong.
  {"Prefill is slow, buy more TFLOPS", W, W, W},
  {"It's the prefill phase — compute bound. More TFLOPS.", W, W, W},
  {"The problem is decode, because it is compute-bound; buy a GPU with more TFLOPS", R, W, W},
  {"It's compute bound during decode so get faster GPU cores", R, W, W},
  {"Definitely compute: the TTFT shows the GPU is fast, so the decode must be limited by TFLOPS too", R, W, M},
  {"I think the prefill is struggling since the first token takes 50ms; more compute would help.", W, W, W},
  // Says nothing gradable.
  {"Neither prefill nor decode; the network is slow.", M, M, M},
  {"Both phases are fine", M, M, M},
  {"prefill", W, M, M},
};
// clang-format on

TEST(PerfGrade, SeedCasePhrasings) {
  const Expected e = seed_case();
  ASSERT_GE(std::size(kSeedCases), 20u);
  for (const Case& c : kSeedCases) {
    const Grade g = grade_answer(c.answer, e);
    EXPECT_EQ(g.phase.mark, c.phase) << c.answer << "\n  " << g.phase.feedback;
    EXPECT_EQ(g.resource.mark, c.resource) << c.answer << "\n  " << g.resource.feedback;
    EXPECT_EQ(g.upgrade.mark, c.upgrade) << c.answer << "\n  " << g.upgrade.feedback;
  }
}

TEST(PerfGrade, FeedbackCarriesTheNumbers) {
  const Grade right = grade_answer("Decode is memory-bandwidth bound; buy faster memory.", seed_case());
  EXPECT_DOUBLE_EQ(right.score(), 3.0);
  EXPECT_EQ(right.phase.feedback.rfind("Right: decode is the struggling phase (TTFT 50.0 ms", 0), 0u)
      << right.phase.feedback;
  EXPECT_NE(right.upgrade.feedback.find("2x FLOP/s gives 1.0x"), std::string::npos) << right.upgrade.feedback;

  const Grade wrong = grade_answer("Prefill is compute-bound; buy more TFLOPS.", seed_case());
  EXPECT_DOUBLE_EQ(wrong.score(), 0.0);
  EXPECT_EQ(wrong.phase.feedback.rfind("Not prefill: the struggling phase is decode", 0), 0u) << wrong.phase.feedback;
  EXPECT_EQ(wrong.upgrade.feedback.rfind("More compute would not help", 0), 0u) << wrong.upgrade.feedback;
  EXPECT_NE(render_grade(wrong, Format::Md).find("0.0 / 3"), std::string::npos);
}

TEST(PerfGrade, APrefillComputeCaseGradesTheOtherWay) {
  Expected e;
  e.phase = Phase::Prefill;
  e.resource = Resource::Compute;
  EXPECT_DOUBLE_EQ(grade_answer("The prefill is compute bound: get more TFLOPS, bandwidth won't help.", e).score(),
                   3.0);
  const Grade g = grade_answer("Decode is memory-bound; get faster memory.", e);
  EXPECT_EQ(g.phase.mark, Mark::Wrong);
  EXPECT_EQ(g.resource.mark, Mark::Wrong);
  EXPECT_EQ(g.upgrade.mark, Mark::Wrong);
}

}  // namespace
}  // namespace kvlab::perf
