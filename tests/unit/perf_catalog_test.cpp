// Hardware and model catalogs, the probe profile format, HF config.json.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/error_text.h"
#include "common/scratch_dir.h"
#include "lab/cost/cost.h"
#include "lab/hardware/hardware.h"
#include "lab/hardware/interconnect.h"
#include "lab/hardware/hw_profile.h"
#include "lab/simulate/model_catalog.h"

namespace kvlab::perf {
namespace {

using test::error_of;

TEST(PerfHardware, CatalogHasTheRequiredDevicesWithSources) {
  for (const char* id : {"h100", "h200", "a100", "a100-pcie", "l4", "l40s", "rtx4090", "rtx3090", "m2-ultra", "m3-max",
                         "m1-max", "epyc-9654", "threadripper-pro-5995wx", "ryzen-7950x"})
    EXPECT_NO_THROW(find_hardware(id)) << id;
  for (const Hardware& h : hardware_catalog()) {
    EXPECT_FALSE(h.source.empty()) << h.id;
    EXPECT_FALSE(h.compute_note.empty()) << h.id;
    EXPECT_GT(h.mem_bw, 0) << h.id;
    EXPECT_GT(h.mem_bytes, 0) << h.id;
    ASSERT_TRUE(h.fp32) << h.id;
    ASSERT_TRUE(h.bf16) << h.id;
  }
}

TEST(PerfHardware, DevicesLinkOverTheirOwnInterconnectAndStreamFromTheirMemoryClass) {
  // SXM parts over NVLink, cards without it over PCIe, SoCs and CPUs over nothing.
  EXPECT_EQ(find_hardware("h100").link, "nvlink4");
  EXPECT_EQ(find_hardware("a100").link, "nvlink3");
  EXPECT_EQ(find_hardware("rtx4090").link, "pcie4");
  EXPECT_EQ(find_hardware("m2-ultra").link, "");
  for (const Hardware& h : hardware_catalog())
    if (!h.link.empty()) EXPECT_NO_THROW(find_link(h.link)) << h.id;
  for (const Link& l : link_catalog()) {
    EXPECT_FALSE(l.source.empty()) << l.id;
    EXPECT_GT(l.bytes_per_s, 0) << l.id;
    EXPECT_GT(l.hop_latency_s, 0) << l.id;
  }
  EXPECT_DOUBLE_EQ(find_link("NVLink4").bytes_per_s, 450e9);  // 900 GB/s both directions together
  EXPECT_EQ(find_hardware("h100").memory_class, MemoryClass::Hbm);
  EXPECT_EQ(find_hardware("rtx3090").memory_class, MemoryClass::Gddr);
  EXPECT_EQ(find_hardware("m1-max").memory_class, MemoryClass::UnifiedLpddr);
  EXPECT_EQ(find_hardware("epyc-9654").memory_class, MemoryClass::Ddr);
}

TEST(PerfHardware, GeForceRunsFp16AccumulateAtTwiceTheFp32AccumulateRate) {
  Precision used{};
  // Ada whitepaper, RTX 4090: FP16 with FP16 accumulate 330.3, with FP32 accumulate 165.2 dense TFLOP/s.
  EXPECT_DOUBLE_EQ(find_hardware("rtx4090").compute_peak(Precision::FP16, &used), 330.3e12);
  EXPECT_EQ(used, Precision::FP16);
  EXPECT_DOUBLE_EQ(find_hardware("rtx4090").compute_peak(Precision::BF16, &used), 165.2e12);
  // Elsewhere fp16 has no separate figure: the bf16 one.
  EXPECT_DOUBLE_EQ(find_hardware("a100").compute_peak(Precision::FP16, &used), 312e12);
  EXPECT_EQ(used, Precision::BF16);
  EXPECT_EQ(weight_format("f16").compute, Precision::FP16);
  EXPECT_EQ(weight_format("bf16").compute, Precision::BF16);
}

TEST(PerfHardware, DenseFiguresAreHalfTheSparseDatasheetOnes) {
  const Hardware h = find_hardware("H100-SXM");  // alias, any case
  EXPECT_TRUE(h.sparse_halved);
  EXPECT_DOUBLE_EQ(*h.bf16, 1979e12 / 2);
  EXPECT_DOUBLE_EQ(*h.fp8, 3958e12 / 2);
  EXPECT_DOUBLE_EQ(h.mem_bw, 3.35e12);
  const Hardware a = find_hardware("a100");
  EXPECT_FALSE(a.sparse_halved);  // the A100 datasheet prints dense figures
  EXPECT_DOUBLE_EQ(*a.bf16, 312e12);
  EXPECT_FALSE(a.fp8.has_value());
}

TEST(PerfHardware, PrecisionFallsBackToWiderMath) {
  Precision used{};
  EXPECT_DOUBLE_EQ(find_hardware("a100").compute_peak(Precision::FP8, &used), 312e12);
  EXPECT_EQ(used, Precision::BF16);
  EXPECT_DOUBLE_EQ(find_hardware("m2-ultra").compute_peak(Precision::INT8, &used), 27.2e12);
  EXPECT_EQ(used, Precision::BF16);
  EXPECT_DOUBLE_EQ(find_hardware("h100").compute_peak(Precision::FP32, &used), 67e12);
  EXPECT_EQ(used, Precision::FP32);
}

TEST(PerfHardware, UnknownIdListsTheCatalog) {
  const std::string e = error_of([] { find_hardware("tpu-v9"); });
  EXPECT_NE(e.find("unknown hardware 'tpu-v9'"), std::string::npos) << e;
  EXPECT_NE(e.find("h100"), std::string::npos) << e;
}

constexpr const char* kProfile = R"({
  "format": "kvlab-hw-profile/1",
  "date": "2025-06-01T12:00:00Z",
  "cpu_model": "Test CPU",
  "cores": 2, "threads": 4, "simd": "avx2",
  "caches": {"l1d_bytes": 32768, "l2_bytes": 524288, "l3_bytes": 8388608},
  "mem_bytes": 8589934592,
  "mem_read_bw": [{"threads": 1, "bytes_per_s": 1.2e10}, {"threads": 2, "bytes_per_s": 1.9e10}],
  "peak_fp32_flops": 1.5e11,
  "peak_int8_ops": 6e11
})";

TEST(PerfHwProfile, ParsesAndRoundTrips) {
  const HwProfile p = parse_hw_profile(kProfile, "test");
  EXPECT_EQ(p.cpu_model, "Test CPU");
  EXPECT_EQ(p.threads, 4);
  EXPECT_EQ(p.l2_bytes, 524288u);
  EXPECT_DOUBLE_EQ(p.best_read_bw(), 1.9e10);
  const HwProfile q = parse_hw_profile(hw_profile_to_json(p), "round trip");
  EXPECT_EQ(q.mem_read_bw.size(), 2u);
  EXPECT_DOUBLE_EQ(q.peak_int8_ops, 6e11);
  // A profile from before the sustained figure was kept has none (0), and
  // writes none back.
  EXPECT_EQ(q.mem_read_bw[1].sustained_bytes_per_s, 0);
  EXPECT_EQ(hw_profile_to_json(q).find("sustained"), std::string::npos);
}

TEST(PerfHwProfile, SustainedBandwidthIsOptionalAndRoundTrips) {
  std::string text = kProfile;
  text.replace(text.find(R"("bytes_per_s": 1.9e10})"), 22, R"("bytes_per_s": 1.9e10, "sustained_bytes_per_s": 1.4e10})");
  const HwProfile p = parse_hw_profile(text, "test");
  EXPECT_EQ(p.mem_read_bw[0].sustained_bytes_per_s, 0);
  EXPECT_DOUBLE_EQ(p.mem_read_bw[1].sustained_bytes_per_s, 1.4e10);
  EXPECT_DOUBLE_EQ(parse_hw_profile(hw_profile_to_json(p), "round trip").mem_read_bw[1].sustained_bytes_per_s, 1.4e10);
  text.replace(text.find("1.4e10"), 6, "-1");
  EXPECT_EQ(error_of([&] { parse_hw_profile(text, "p.json"); }),
            "p.json: field 'sustained_bytes_per_s' missing or not a positive number");
}

TEST(PerfHwProfile, KernelFiguresAreOptionalAndRoundTrip) {
  EXPECT_FALSE(parse_hw_profile(kProfile, "test").kernels);  // a profile from before kernels were probed
  std::string text = kProfile;
  text.insert(text.rfind('}'), R"(, "kernels": {"threads": 4, "dispatch_s": 5e-7, "elementwise_flops_per_s": 3e9,
    "gemv_working_set_bytes": 134217728,
    "matmul": [{"weights": "q4_1", "gemv_bytes_per_s": 9e9, "gemv_row_s": 2e-8, "gemv_call_s": 3e-6, "gemm_ops_per_s": 6e10,
                "gemm_input_s": 4e-10, "gemm_output_s": 1e-10, "batch_mac_s": 6e-12, "batch_row_s": 1e-9, "batch_tokens": 8},
               {"weights": "q8_0", "gemv_bytes_per_s": 9e9, "gemv_row_s": 2e-8, "gemv_call_s": 3e-6, "gemm_ops_per_s": 6e10}],
    "attention": [{"kv": "f16", "head_dim": 64, "heads": 3, "decode_flops_per_s": 1e10, "prefill_flops_per_s": 1.5e10,
                   "prefill_task_s": 2e-7},
                  {"kv": "f16", "head_dim": 128, "heads": 3, "decode_flops_per_s": 2e10, "prefill_flops_per_s": 2.5e10},
                  {"kv": "f16", "head_dim": 64, "decode_flops_per_s": 3e10, "prefill_flops_per_s": 3.5e10}]})");
  const HwProfile p = parse_hw_profile(text, "test");
  ASSERT_TRUE(p.kernels);
  EXPECT_EQ(p.kernels->threads, 4);
  EXPECT_DOUBLE_EQ(p.kernels->dispatch_s, 5e-7);
  EXPECT_DOUBLE_EQ(p.kernels->elementwise_flops_per_s, 3e9);
  // The decode matmuls' working set is optional: 0 in profiles from before it was kept.
  EXPECT_DOUBLE_EQ(p.kernels->gemv_working_set_bytes, 134217728);
  {
    std::string before = text;
    const std::string field = "\n    \"gemv_working_set_bytes\": 134217728,";
    before.erase(before.find(field), field.size());
    EXPECT_DOUBLE_EQ(parse_hw_profile(before, "test").kernels->gemv_working_set_bytes, 0);
  }
  ASSERT_NE(p.kernels->find_matmul("q4_1"), nullptr);
  EXPECT_DOUBLE_EQ(p.kernels->find_matmul("q4_1")->gemv_row_s, 2e-8);
  EXPECT_DOUBLE_EQ(p.kernels->find_matmul("q4_1")->gemv_call_s, 3e-6);
  // The prefill matmul's costs per token of an input column and an output
  // row are optional: 0 in profiles from before they were measured.
  EXPECT_DOUBLE_EQ(p.kernels->find_matmul("q4_1")->gemm_input_s, 4e-10);
  EXPECT_DOUBLE_EQ(p.kernels->find_matmul("q4_1")->gemm_output_s, 1e-10);
  EXPECT_DOUBLE_EQ(p.kernels->find_matmul("q8_0")->gemm_input_s, 0);
  EXPECT_DOUBLE_EQ(p.kernels->find_matmul("q8_0")->gemm_output_s, 0);
  // q4_1's small-batch costs (batch_*) are from profiles of older probes: read past, not refused.
  EXPECT_TRUE(p.kernels_error.empty()) << p.kernels_error;
  {
    const HwProfile again = parse_hw_profile(hw_profile_to_json(p), "round trip");
    EXPECT_DOUBLE_EQ(again.kernels->find_matmul("q4_1")->gemm_input_s, 4e-10);
    EXPECT_DOUBLE_EQ(again.kernels->find_matmul("q8_0")->gemm_input_s, 0);  // still absent, still readable
  }
  EXPECT_EQ(p.kernels->find_matmul("q4_0"), nullptr);
  EXPECT_EQ(p.kernels->find_attention("f16", 96, 3)->head_dim, 64);  // ties go to the first
  EXPECT_EQ(p.kernels->find_attention("f16", 120, 3)->head_dim, 128);
  EXPECT_EQ(p.kernels->find_attention("q8_0", 64, 3), nullptr);
  EXPECT_EQ(p.kernels->find_attention("f16", 64, 2), nullptr);
  // An entry without "heads" is from a profile that timed passes of 4.
  EXPECT_DOUBLE_EQ(p.kernels->find_attention("f16", 128, 4)->decode_flops_per_s, 3e10);
  // The per-task cost is optional: 0 in profiles from before it was measured.
  EXPECT_DOUBLE_EQ(p.kernels->find_attention("f16", 64, 3)->prefill_task_s, 2e-7);
  EXPECT_DOUBLE_EQ(p.kernels->find_attention("f16", 128, 3)->prefill_task_s, 0);
  const HwProfile q = parse_hw_profile(hw_profile_to_json(p), "round trip");
  EXPECT_EQ(hw_profile_to_json(q), hw_profile_to_json(p));
  // "this" carries them to the simulator.
  const test::ScratchDir dir;
  const std::string path = dir.file("profile.json");
  std::ofstream(path) << text;
  EXPECT_DOUBLE_EQ(find_hardware("this", path).kernels->attention[1].prefill_flops_per_s, 2.5e10);
  // A kernels object this version cannot read is left out, with the reason,
  // so commands that only need the peaks still load the profile.
  text.replace(text.find("\"gemm_ops_per_s\": 6e10"), 22, "\"gemm_ops_per_s\": -1");
  const HwProfile bad = parse_hw_profile(text, "p.json");
  EXPECT_FALSE(bad.kernels);
  EXPECT_EQ(bad.kernels_error, "p.json: kernels: field 'gemm_ops_per_s' missing or not a positive number");
  EXPECT_DOUBLE_EQ(bad.peak_int8_ops, 6e11);
  std::string wide = kProfile;
  wide.insert(wide.rfind('}'), R"(, "kernels": {"threads": 4, "dispatch_s": 5e-7, "elementwise_flops_per_s": 3e9,
    "matmul": [], "attention": [{"kv": "f16", "head_dim": 64, "heads": 5, "decode_flops_per_s": 1e10,
                                 "prefill_flops_per_s": 1.5e10}]})");
  EXPECT_EQ(parse_hw_profile(wide, "p.json").kernels_error, "p.json: kernels: field 'heads' over the kernels' pass width");
}

TEST(PerfHwProfile, AGroupsAttentionIsItsPasses) {
  // A group of 6 query heads per KV head runs a pass of 4 and one of 2:
  // seconds per FLOP add up weighted by the heads of each pass, and a task
  // (one token, one KV head) runs both passes, so it pays both fixed costs.
  KernelRates k;
  k.attention = {{"f16", 64, 4, 4e10, 8e10, 3e-7}, {"f16", 64, 2, 1e10, 2e10, 1e-7}};
  const std::optional<AttentionRate> g = k.attention_for_group("f16", 64, 6);
  ASSERT_TRUE(g);
  EXPECT_DOUBLE_EQ(g->decode_flops_per_s, 6 / (4 / 4e10 + 2 / 1e10));
  EXPECT_DOUBLE_EQ(g->prefill_flops_per_s, 6 / (4 / 8e10 + 2 / 2e10));
  EXPECT_DOUBLE_EQ(g->prefill_task_s, 4e-7);
  EXPECT_FALSE(k.attention_for_group("f16", 64, 3));  // no pass of 3 measured
}

TEST(PerfHwProfile, ReadBandwidthBySizeIsOptionalAndRoundTrips) {
  std::string text = kProfile;
  const std::string curve = R"("read_bw_by_size": [{"bytes": 8388608, "bytes_per_s": 6e10},
    {"bytes": 33554432, "bytes_per_s": 3e10}, {"bytes": 1073741824, "bytes_per_s": 2e10}],
  "peak_fp32_flops")";
  text.replace(text.find(R"("peak_fp32_flops")"), 17, curve);
  const HwProfile p = parse_hw_profile(text, "test");
  ASSERT_EQ(p.read_bw_by_size.size(), 3u);
  EXPECT_DOUBLE_EQ(p.read_bw_by_size[1].bytes, 33554432);
  EXPECT_DOUBLE_EQ(p.read_bw_by_size[1].bytes_per_s, 3e10);
  const HwProfile q = parse_hw_profile(hw_profile_to_json(p), "round trip");
  ASSERT_EQ(q.read_bw_by_size.size(), 3u);
  EXPECT_DOUBLE_EQ(q.read_bw_by_size[2].bytes_per_s, 2e10);
  // The simulator's "this" carries it.
  EXPECT_EQ(hardware_from_profile(p, "test").read_bw_by_size.size(), 3u);
  // A profile from before it was measured has none, and writes none back.
  EXPECT_TRUE(parse_hw_profile(kProfile, "test").read_bw_by_size.empty());
  EXPECT_EQ(hw_profile_to_json(parse_hw_profile(kProfile, "test")).find("read_bw_by_size"), std::string::npos);
  std::string unsorted = text;
  unsorted.replace(unsorted.find("33554432"), 8, "1073741824");
  EXPECT_EQ(error_of([&] { parse_hw_profile(unsorted, "p.json"); }),
            "p.json: field 'read_bw_by_size' sizes must be strictly ascending");
  std::string negative = text;
  negative.replace(negative.find("3e10"), 4, "-3e10");
  EXPECT_EQ(error_of([&] { parse_hw_profile(negative, "p.json"); }),
            "p.json: field 'bytes_per_s' missing or not a positive number");
}

TEST(PerfHwProfile, CacheSpeedupInterpolatesInLogSize) {
  // 60 GB/s up to 8 MiB, 30 at 32 MiB, 20 from 1 GiB (the DRAM point).
  const std::vector<SizedBandwidth> c = {{8 << 20, 6e10}, {32 << 20, 3e10}, {1 << 30, 2e10}};
  EXPECT_DOUBLE_EQ(cache_speedup({}, 1e6), 1.0);  // no curve: DRAM everywhere
  EXPECT_DOUBLE_EQ(cache_speedup(c, 1e3), 3.0);   // below the first point: its figure
  EXPECT_DOUBLE_EQ(cache_speedup(c, 8 << 20), 3.0);
  EXPECT_DOUBLE_EQ(cache_speedup(c, 32 << 20), 1.5);
  // 16 MiB is halfway from 8 to 32 MiB in log(size): 45 GB/s.
  EXPECT_DOUBLE_EQ(cache_speedup(c, 16 << 20), 2.25);
  // 1 GiB and beyond: the DRAM point itself.
  EXPECT_DOUBLE_EQ(cache_speedup(c, double(1 << 30)), 1.0);
  EXPECT_DOUBLE_EQ(cache_speedup(c, 1e12), 1.0);
  // Never below 1, though a noisy point may read slower than DRAM did.
  const std::vector<SizedBandwidth> noisy = {{8 << 20, 1.5e10}, {1 << 30, 2e10}};
  EXPECT_DOUBLE_EQ(cache_speedup(noisy, 8 << 20), 1.0);
}

TEST(PerfHwProfile, RejectsBadFieldsByName) {
  EXPECT_EQ(error_of([] { parse_hw_profile(R"({"format": "other"})", "p.json"); }),
            "p.json: field 'format' must be \"kvlab-hw-profile/1\"");
  std::string no_bw = kProfile;
  no_bw.replace(no_bw.find("\"mem_read_bw\""), 13, "\"bandwidths\"");
  EXPECT_EQ(error_of([&] { parse_hw_profile(no_bw, "p.json"); }),
            "p.json: field 'mem_read_bw' missing or not a non-empty array of {threads, bytes_per_s}");
  EXPECT_NE(error_of([] { parse_hw_profile("{", "p.json"); }).find("p.json: not valid JSON"), std::string::npos);
  // A number beyond double's range: nlohmann's out_of_range, not a parse_error
  // (found by tests/fuzz/fuzz_api), is the same one-line error.
  EXPECT_NE(error_of([] { parse_hw_profile(R"({"format": 4e5482})", "p.json"); }).find("p.json: not valid JSON"),
            std::string::npos);
  EXPECT_NE(error_of([] { parse_hf_config(R"({"hidden_size": 1e999})", "config.json"); })
                .find("config.json: not valid JSON"),
            std::string::npos);
}

TEST(PerfHwProfile, ThisMachineComesFromTheProfile) {
  const test::ScratchDir dir;
  const std::string path = dir.file("profile.json");
  std::ofstream(path) << kProfile;
  const Hardware h = find_hardware("this", path);
  EXPECT_EQ(h.kind, HwKind::Cpu);
  EXPECT_DOUBLE_EQ(*h.fp32, 1.5e11);
  EXPECT_DOUBLE_EQ(*h.int8, 6e11);
  EXPECT_DOUBLE_EQ(h.mem_bw, 1.9e10);
  EXPECT_NE(h.name.find("Test CPU"), std::string::npos);

  std::filesystem::remove(path);
  const std::string e = error_of([&] { find_hardware("this", path); });
  EXPECT_EQ(e, "no hardware profile at " + path + ": run `kvlab probe` to measure this machine first");
}

TEST(PerfModels, CatalogHasTheRequiredModels) {
  for (const char* id : {"llama-3.1-8b", "llama-2-7b", "mistral-7b", "qwen2.5-7b", "llama-3.1-70b", "smollm2-135m",
                         "smollm2-360m", "smollm2-1.7b", "qwen2.5-0.5b", "qwen3-8b", "qwen3-0.6b", "gemma-3-1b",
                         "mixtral-8x7b", "qwen3-30b-a3b"}) {
    const ResolvedModel m = resolve_model(id);
    EXPECT_FALSE(m.source.empty()) << id;
    EXPECT_NO_THROW(validate_config(m.config, id));
  }
  EXPECT_EQ(resolve_model("LLAMA-3.1-8B").config.n_head_kv, 8);
}

constexpr const char* kHfConfig = R"({
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "hidden_size": 4096,
  "intermediate_size": 14336,
  "num_hidden_layers": 32,
  "num_attention_heads": 32,
  "num_key_value_heads": 8,
  "vocab_size": 128256,
  "head_dim": null,
  "rope_theta": 500000.0,
  "rms_norm_eps": 1e-05,
  "tie_word_embeddings": false,
  "max_position_embeddings": 131072
})";

TEST(PerfModels, HfConfigJsonMatchesTheCatalogEntry) {
  const model::Config c = parse_hf_config(kHfConfig, "config.json");
  const model::Config& ref = resolve_model("llama-3.1-8b").config;
  EXPECT_EQ(c.n_layer, ref.n_layer);
  EXPECT_EQ(c.n_embd, ref.n_embd);
  EXPECT_EQ(c.n_ff, ref.n_ff);
  EXPECT_EQ(c.n_head_kv, ref.n_head_kv);
  EXPECT_EQ(c.head_dim, 128);  // null: hidden_size / heads
  EXPECT_EQ(c.n_vocab, ref.n_vocab);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.f);
  EXPECT_EQ(c.n_ctx_train, 131072);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.name, "LlamaForCausalLM");

  // A config.json file on disk resolves the same way.
  const test::ScratchDir dir;
  const std::string path = dir.file("config.json");
  std::ofstream(path) << kHfConfig;
  EXPECT_EQ(resolve_model(path).config.n_ff, 14336);
}

// A GGUF's bits per weight come from its tensors, not its file size: the
// f32 stories260K (1.19 MB file, 0.29 M parameters) is 32 bits, not 32.4.
TEST(PerfModels, GgufBitsPerWeightAreTheTensors) {
  const ResolvedModel m = resolve_model(std::string(KVLAB_SOURCE_DIR) + "/tests/models/stories260K.gguf");
  ASSERT_TRUE(m.file_bits_per_weight);
  EXPECT_DOUBLE_EQ(*m.file_bits_per_weight, 32.0);
}

// gemma3's text config: the architecture's traits and its sliding window;
// then it costs what the catalog's Gemma 3 1B costs. Likewise qwen2 and qwen3.
TEST(PerfModels, HfConfigsGetTheArchitectureTraits) {
  const model::Config c = parse_hf_config(R"({
    "model_type": "gemma3_text", "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
    "max_position_embeddings": 32768, "rope_theta": 1000000.0, "rms_norm_eps": 1e-06,
    "sliding_window": 512, "sliding_window_pattern": 6, "tie_word_embeddings": true})",
                                          "config.json");
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.scale_embeddings);
  EXPECT_EQ(c.ffn_act, model::FfnAct::GeluTanh);
  EXPECT_EQ(c.swa_window, 512);
  EXPECT_TRUE(c.is_swa(0) && !c.is_swa(5));
  EXPECT_DOUBLE_EQ(param_count(c).total(), param_count(resolve_model("gemma-3-1b").config).total());
  EXPECT_TRUE(parse_hf_config(R"({"model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864,
    "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936})",
                              "config.json")
                  .qkv_bias);
  // Qwen3-0.6B's config.json: QK-norm, half-split RoPE, no biases; it costs
  // what the catalog's entry costs.
  const model::Config q = parse_hf_config(R"({
    "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28,
    "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "rope_theta": 1000000, "rms_norm_eps": 1e-06, "tie_word_embeddings": true})",
                                          "config.json");
  EXPECT_TRUE(q.qk_norm && !q.qkv_bias && q.rope_order == model::RopeOrder::NeoX);
  EXPECT_DOUBLE_EQ(param_count(q).total(), param_count(resolve_model("qwen3-0.6b").config).total());
}

// Mixtral-8x7B-v0.1's and Qwen3-30B-A3B's config.json (less the training
// fields): the catalog's entries, experts and all.
constexpr const char* kMixtralConfig = R"({
  "architectures": ["MixtralForCausalLM"], "model_type": "mixtral", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 32768, "num_attention_heads": 32,
  "num_experts_per_tok": 2, "num_hidden_layers": 32, "num_key_value_heads": 8, "num_local_experts": 8,
  "rms_norm_eps": 1e-05, "rope_theta": 1e6, "sliding_window": null, "tie_word_embeddings": false,
  "vocab_size": 32000})";
constexpr const char* kQwen3MoeConfig = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "decoder_sparse_step": 1, "head_dim": 128,
  "hidden_size": 2048, "intermediate_size": 6144, "max_position_embeddings": 40960, "mlp_only_layers": [],
  "moe_intermediate_size": 768, "norm_topk_prob": true, "num_attention_heads": 32, "num_experts": 128,
  "num_experts_per_tok": 8, "num_hidden_layers": 48, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0, "tie_word_embeddings": false, "vocab_size": 151936})";

// `json` with `from` replaced by `to`.
std::string edited(std::string json, std::string_view from, std::string_view to) {
  json.replace(json.find(from), from.size(), to);
  return json;
}

TEST(PerfModels, HfMixtureOfExpertsConfigsMatchTheCatalogEntries) {
  const model::Config m = parse_hf_config(kMixtralConfig, "config.json");
  EXPECT_EQ(m.arch, "llama");
  EXPECT_EQ(m.n_expert, 8);
  EXPECT_EQ(m.n_expert_used, 2);
  EXPECT_EQ(m.n_ff_exp, 14336);        // intermediate_size is the expert's
  EXPECT_TRUE(m.expert_weights_norm);  // Mixtral always renormalises
  EXPECT_DOUBLE_EQ(param_count(m).total(), param_count(resolve_model("mixtral-8x7b").config).total());

  const model::Config q = parse_hf_config(kQwen3MoeConfig, "config.json");
  EXPECT_EQ(q.arch, "qwen3moe");
  EXPECT_TRUE(q.qk_norm && q.rope_order == model::RopeOrder::NeoX);
  EXPECT_EQ(q.n_expert, 128);
  EXPECT_EQ(q.n_expert_used, 8);
  EXPECT_EQ(q.n_ff_exp, 768);
  EXPECT_TRUE(q.expert_weights_norm);
  const model::Config& ref = resolve_model("qwen3-30b-a3b").config;
  EXPECT_DOUBLE_EQ(param_count(q).total(), param_count(ref).total());
  EXPECT_DOUBLE_EQ(param_count(q).active(), param_count(ref).active());
  // Qwen's norm_topk_prob defaults to false.
  const std::string unnormalised = edited(kQwen3MoeConfig, "\"norm_topk_prob\": true, ", "");
  EXPECT_FALSE(parse_hf_config(unnormalised, "c.json").expert_weights_norm);
  // No experts is a dense model.
  const std::string dense = edited(kQwen3MoeConfig, "\"num_experts\": 128", "\"num_experts\": 0");
  EXPECT_FALSE(parse_hf_config(dense, "c.json").is_moe());
}

// Qwen1.5-MoE-A2.7B: 60 experts of 1408, 4 per token, and a gated shared
// expert of 5632 every token runs: 14.3 B parameters, 2.7 B active.
TEST(PerfModels, HfSharedExpertConfig) {
  const model::Config c = parse_hf_config(R"({
    "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632, "moe_intermediate_size": 1408,
    "shared_expert_intermediate_size": 5632, "num_experts": 60, "num_experts_per_tok": 4,
    "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
    "norm_topk_prob": false, "decoder_sparse_step": 1, "mlp_only_layers": [], "tie_word_embeddings": false})",
                                          "config.json");
  EXPECT_EQ(c.arch, "qwen2moe");
  EXPECT_TRUE(c.qkv_bias && c.shared_expert_gated);
  EXPECT_FALSE(c.expert_weights_norm);
  EXPECT_EQ(c.n_ff_shexp, 5632);
  EXPECT_NEAR(param_count(c).total() / 14.3e9, 1.0, 0.01);
  EXPECT_NEAR(param_count(c).active() / 2.69e9, 1.0, 0.01);
}

TEST(PerfModels, HfMixtureOfExpertsErrorsNameTheField) {
  auto error = [](const char* json, std::string_view from, std::string_view to) {
    return error_of([&] { parse_hf_config(edited(json, from, to), "c.json"); });
  };
  EXPECT_EQ(error(kMixtralConfig, "\"num_experts_per_tok\": 2", "\"num_experts_per_tok\": 9"),
            "c.json: field 'num_experts_per_tok' must not exceed num_local_experts (8)");
  EXPECT_EQ(error(kQwen3MoeConfig, "\"num_experts_per_tok\": 8", "\"num_experts_per_tok\": 0"),
            "c.json: field 'num_experts_per_tok' must be a positive integer");
  EXPECT_EQ(error(kQwen3MoeConfig, "\"num_experts_per_tok\": 8, ", ""),
            "c.json: field 'num_experts_per_tok' missing (expected a positive integer)");
  EXPECT_EQ(error(kQwen3MoeConfig, "\"mlp_only_layers\": []", "\"mlp_only_layers\": [0, 47]"),
            "c.json: field 'mlp_only_layers' must be empty: dense layers among the experts' are not modelled");
  EXPECT_EQ(error(kQwen3MoeConfig, "\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2"),
            "c.json: field 'decoder_sparse_step' must be 1: dense layers between the experts' are not modelled");
  EXPECT_EQ(error(kQwen3MoeConfig, "\"norm_topk_prob\": true", "\"norm_topk_prob\": 1"),
            "c.json: field 'norm_topk_prob' must be true or false");
}

TEST(PerfModels, HfConfigErrorsNameTheField) {
  EXPECT_EQ(error_of([] { parse_hf_config(R"({"intermediate_size": 1})", "c.json"); }),
            "c.json: field 'hidden_size' missing (expected a positive integer)");
  EXPECT_EQ(error_of([] {
              parse_hf_config(R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                                  "num_attention_heads": 6, "num_key_value_heads": 4, "vocab_size": 10,
                                  "head_dim": 8})",
                              "c.json");
            }),
            "c.json: attention heads (6) must be a multiple of KV heads (4)");
  EXPECT_EQ(error_of([] { parse_hf_config(R"({"hidden_size": -4})", "c.json"); }),
            "c.json: field 'hidden_size' must be a positive integer");
  EXPECT_NE(error_of([] { resolve_model("gpt-9"); }).find("unknown model 'gpt-9'"), std::string::npos);
}

TEST(PerfModelCatalog, PricedWeightsAutoFollowsAFilesOwnBits) {
  ResolvedModel catalog = resolve_model("llama-3.1-8b");
  EXPECT_EQ(priced_weights("auto", catalog).format, "bf16");
  EXPECT_FALSE(priced_weights("auto", catalog).bits);
  EXPECT_EQ(priced_weights("q4_0", catalog).format, "q4_0");
  // A GGUF file of 5.74 bits per weight (the default model) whose layers
  // are q4_1: q4_1 at the file's own bits.
  catalog.file_bits_per_weight = 5.74;
  catalog.file_layer_dtype = "q4_1";
  EXPECT_EQ(priced_weights("auto", catalog).format, "q4_1");
  EXPECT_DOUBLE_EQ(*priced_weights("auto", catalog).bits, 5.74);
  // Layers in a dtype the simulator has no format for (q3_k), or none: the
  // named format nearest in size, q5_0 (5.5 bits) rather than q5_1 (6).
  catalog.file_layer_dtype = "q3_k";
  EXPECT_EQ(priced_weights("auto", catalog).format, "q5_0");
  catalog.file_layer_dtype.reset();
  EXPECT_EQ(priced_weights("auto", catalog).format, "q5_0");
  EXPECT_EQ(priced_weights("q8_0", catalog).format, "q8_0");  // a name given wins
  EXPECT_FALSE(priced_weights("q8_0", catalog).bits);
}

}  // namespace
}  // namespace kvlab::perf
