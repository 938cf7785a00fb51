// kvlab diagnose: the seed's case, a prefill-bound case, contradictions,
// a run without KV cache, metrics from tensor-parallel devices, and bad input.
#include <gtest/gtest.h>

#include <algorithm>

#include "common/error.h"
#include "common/error_text.h"
#include "common/probed_machine.h"
#include "lab/diagnose/diagnose.h"
#include "lab/report/report.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/parallel.h"
#include "lab/simulate/simulate.h"

namespace kvlab::perf {
namespace {

DiagnoseOptions eight_b(double ttft_ms, double tok_s, int64_t prompt = 512) {
  DiagnoseOptions d;
  d.obs.ttft_s = ttft_ms / 1e3;
  d.obs.decode_tok_s = tok_s;
  d.obs.prompt_tokens = prompt;
  d.model_id = "llama-3.1-8b";
  d.model = resolve_model(d.model_id).config;
  return d;
}

bool has_finding(const Diagnosis& d, const std::string& text) {
  for (const Contradiction& c : d.contradictions)
    if (c.finding.find(text) != std::string::npos) return true;
  return false;
}

TEST(PerfDiagnose, TheSeedsCaseIsDecodeAndMemoryBandwidth) {
  // "Time-to-First-Token is 50ms ... throughput is only 2 tokens per second", 8B model.
  const Diagnosis d = diagnose(eight_b(50, 2));
  EXPECT_EQ(d.struggling, Phase::Decode);
  EXPECT_TRUE(d.misses_target);
  EXPECT_EQ(d.limiting, Resource::MemoryBandwidth);
  EXPECT_EQ(d.decode.bound, Bound::Memory);
  // The numbers that show it: ~1 FLOP/byte, ~30 GB/s effective.
  EXPECT_NEAR(d.decode.intensity, 1.0, 0.1);
  EXPECT_NEAR(d.decode.achieved_bw / 1e9, 30.2, 0.5);
  // More TFLOPS do nothing for a memory-bound step; more bandwidth scales it.
  EXPECT_NEAR(d.gain_2x_flops, 1.0, 0.01);
  EXPECT_NEAR(d.gain_2x_bandwidth, 2.0, 0.01);
  EXPECT_NE(d.upgrade.find("Faster memory, not more TFLOPS"), std::string::npos) << d.upgrade;
  EXPECT_NE(d.cause.find("the weights are not (all) in device memory while decoding"), std::string::npos) << d.cause;
  // Every catalog GPU holding the weights would decode far faster.
  EXPECT_TRUE(d.hardware.front().fits);
  EXPECT_GT(d.hardware.front().decode_gain, 50);
  // Remedies are ranked; the first speeds up the user's own stream.
  ASSERT_FALSE(d.remedies.empty());
  EXPECT_FALSE(d.remedies.front().aggregate);
  for (size_t i = 1; i < d.remedies.size(); ++i) {
    if (d.remedies[i].aggregate == d.remedies[i - 1].aggregate) {
      EXPECT_LE(d.remedies[i].gain, d.remedies[i - 1].gain);
    }
  }
  // 50 ms reads the 15 GB of weights at ≥ 300 GB/s: 10x the decode's bandwidth.
  EXPECT_TRUE(has_finding(d, "The TTFT is too fast for the bandwidth the decode rate implies"));
  const std::string md = render_diagnosis(d, Format::Md);
  EXPECT_NE(md.find("**Struggling phase: decode.**"), std::string::npos);
  EXPECT_NE(md.find("**Limiting resource: memory bandwidth.**"), std::string::npos);
  EXPECT_NE(render_diagnosis(d, Format::Json).find("\"struggling_phase\": \"decode\""), std::string::npos);
}

TEST(PerfDiagnose, OnAnH100TheDecodeIsFarBelowItsRoofline) {
  DiagnoseOptions in = eight_b(50, 2);
  in.hw = find_hardware("h100");
  const Diagnosis d = diagnose(in);
  ASSERT_TRUE(d.decode.on_hw);
  EXPECT_LT(d.decode.on_hw->bw_utilization, 0.01);  // MBU under 1%
  EXPECT_GT(1.0 / *d.decode.predicted_s, 100.0);    // the H100 roofline predicts > 100 tok/s
  EXPECT_EQ(d.remedies.front().name, "keep all weights in device memory (no offload, no paging)");
  EXPECT_GT(d.remedies.front().gain, 50);
}

TEST(PerfDiagnose, ALongSlowPromptIsPrefillAndCompute) {
  DiagnoseOptions in = eight_b(1500, 15, 4096);
  in.hw = find_hardware("l4");
  const Diagnosis d = diagnose(in);
  EXPECT_EQ(d.struggling, Phase::Prefill);
  EXPECT_EQ(d.limiting, Resource::Compute);
  EXPECT_GT(d.gain_2x_flops, 1.8);
  EXPECT_LT(d.gain_2x_bandwidth, 1.05);
  EXPECT_NE(d.upgrade.find("More compute"), std::string::npos);
  ASSERT_TRUE(d.prefill.on_hw);
  EXPECT_GT(d.prefill.on_hw->flops_utilization, 0.3);  // MFU
}

TEST(PerfDiagnose, ConsistentMetricsRaiseNoContradiction) {
  DiagnoseOptions in = eight_b(20, 140);
  in.hw = find_hardware("h100");
  const Diagnosis d = diagnose(in);
  EXPECT_TRUE(d.contradictions.empty());
  EXPECT_FALSE(d.misses_target);
}

TEST(PerfDiagnose, FasterThanThePeakIsAContradiction) {
  DiagnoseOptions in = eight_b(100, 1000);
  in.hw = find_hardware("h100");
  EXPECT_TRUE(has_finding(diagnose(in), "above what NVIDIA H100 SXM5 80GB's peak bandwidth allows"));
  in = eight_b(1, 50);
  in.hw = find_hardware("h100");
  EXPECT_TRUE(has_finding(diagnose(in), "is below what NVIDIA H100 SXM5 80GB's peak allows"));
  // Without hardware: beyond every catalog device.
  EXPECT_TRUE(has_finding(diagnose(eight_b(100, 5000)), "more than any catalog device's memory"));
}

TEST(PerfDiagnose, WithoutKvCacheTurningItOnIsARemedy) {
  DiagnoseOptions in = eight_b(50, 2);
  in.obs.kv_cache = false;
  in.obs.gen_tokens = 512;
  in.hw = find_hardware("h100");
  const Diagnosis d = diagnose(in);
  EXPECT_GT(d.decode.intensity, 100);  // recomputing ~768 tokens per step
  EXPECT_EQ(d.limiting, Resource::Compute);
  const auto cache = std::find_if(d.remedies.begin(), d.remedies.end(),
                                  [](const Remedy& r) { return r.name == "turn the KV cache on"; });
  ASSERT_NE(cache, d.remedies.end());
  EXPECT_GT(cache->gain, 2.5);
}

// A probed "this": the user's machine is priced with what kvlab's kernels
// reach on it (hw_eff), catalog devices keep the default efficiencies, and
// integer weights are priced at the CPU's int8 peak, as kvlab simulate does.
TEST(PerfDiagnose, AProbedMachineIsPricedWithItsMeasuredKernels) {
  DiagnoseOptions in;
  in.model_id = "smollm2-135m";
  in.model = resolve_model(in.model_id).config;
  in.weights = "q4_1";
  in.obs.ttft_s = 2.0;
  in.obs.decode_tok_s = 100;
  in.obs.prompt_tokens = 512;
  in.hw = test::probed_machine();
  const Diagnosis plain = diagnose(in);
  in.hw_eff = efficiency_for(*in.hw, "q4_1", "f16", in.model);
  const Diagnosis measured = diagnose(in);
  EXPECT_NE(measured.reference.find("measured by kvlab probe"), std::string::npos) << measured.reference;
  EXPECT_NE(plain.reference.find("default efficiencies"), std::string::npos) << plain.reference;
  // Decode priced at the measured 5 GB/s matmul stream, not 0.8 x 20 GB/s.
  ASSERT_TRUE(measured.decode.predicted_s && plain.decode.predicted_s && plain.prefill.predicted_s);
  EXPECT_GT(*measured.decode.predicted_s, 2 * *plain.decode.predicted_s);
  ASSERT_EQ(measured.hardware.size(), plain.hardware.size());
  for (size_t i = 0; i < plain.hardware.size(); ++i)
    EXPECT_DOUBLE_EQ(measured.hardware[i].decode_tok_s, plain.hardware[i].decode_tok_s) << plain.hardware[i].id;
  // The prefill is priced at the int8 peak (200 Gop/s x 0.6 by default):
  // slower than that would be impossible, so the estimate is below it.
  EXPECT_LT(*plain.prefill.predicted_s, 2 * param_count(in.model).total() * 512 / (2e11 * 0.6) * 1.5);
}

TEST(PerfDiagnose, BadInputsAndRunJson) {
  auto msg = [](const DiagnoseOptions& in) { return test::error_of([&] { diagnose(in); }); };
  EXPECT_EQ(msg(eight_b(0, 2)), "--ttft-ms must be a positive number");
  EXPECT_EQ(msg(eight_b(50, -1)), "--decode-tok-s must be a positive number");

  const RunRecord r = parse_run_json(
      R"({"prompt_tokens": 40, "tokens": [1, 2, 3], "ttft_ms": 12.5, "decode_tok_s": 33.0,
          "kv_cache": false, "model": "models/x.gguf"})",
      "run.json");
  EXPECT_DOUBLE_EQ(r.obs.ttft_s, 0.0125);
  EXPECT_EQ(r.obs.prompt_tokens, 40);
  EXPECT_EQ(r.obs.gen_tokens, 3);
  EXPECT_FALSE(r.obs.kv_cache);
  EXPECT_EQ(r.model, "models/x.gguf");
  try {
    parse_run_json(R"({"prompt_tokens": 4, "decode_tok_s": 3})", "run.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "run.json: field 'ttft_ms' missing or not a positive number");
  }
}

TEST(PerfDiagnose, MetricsFromTensorParallelDevicesArePricedOnThatLayout) {
  // 70B at 40 tok/s on 4 H100s: each device reads a quarter of the weights,
  // so MBU is against four devices' bandwidth and the prediction is the
  // layout's; alone, the weights would not fit.
  DiagnoseOptions in = eight_b(200, 40);
  in.model_id = "llama-3.1-70b";
  in.model = resolve_model(in.model_id).config;
  in.hw = find_hardware("h100");
  in.layout = make_layout(4, 1, "", *in.hw);
  const Diagnosis d = diagnose(in);
  ASSERT_TRUE(d.decode.on_hw && d.decode.predicted_s);
  EXPECT_DOUBLE_EQ(d.decode.on_hw->bw_utilization, d.decode.bytes / d.decode.seconds / (4 * 3.35e12));
  Pass step;
  step.past = 512;
  const Machine m = make_machine(*in.hw, Precision::BF16, in.eff);
  EXPECT_DOUBLE_EQ(*d.decode.predicted_s, time_layout_pass(in.model, step, m, in.layout).seconds);
  EXPECT_EQ(d.cause.find("do not fit"), std::string::npos);
  in.layout = {};
  EXPECT_NE(diagnose(in).cause.find("do not fit"), std::string::npos);
  // Without the hardware there are no devices to split over.
  in.hw.reset();
  in.layout = make_layout(2, 1, "nvlink4", find_hardware("h100"));
  EXPECT_EQ(test::error_of([&] { diagnose(in); }), "--tp and --pp need --hw: the devices the metrics come from");
}

}  // namespace
}  // namespace kvlab::perf
