// Tensor and pipeline parallelism in the simulator: the ring all-reduce by
// hand, a device's shard and what it holds, the smallest layout that fits,
// and that one device prices exactly as before.
#include <gtest/gtest.h>

#include "common/error.h"
#include "common/error_text.h"
#include "lab/hardware/hardware.h"
#include "lab/hardware/interconnect.h"
#include "lab/simulate/device_memory.h"
#include "lab/simulate/layout.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/parallel.h"
#include "lab/simulate/simulate.h"

namespace kvlab::perf {
namespace {

const model::Config& llama70b() {
  static const model::Config c = resolve_model("llama-3.1-70b").config;
  return c;
}

TEST(PerfParallel, RingAllReduceMovesTwoNMinusOneOverNOfTheBytesInTwoNMinusOneSteps) {
  const Link link{"test", "test", 100e9, 1e-6, ""};
  EXPECT_EQ(allreduce_seconds(1e6, 1, link), 0.0);
  // n = 4: 2·3/4 of 1 MB at 100 GB/s = 7.5 us, plus 6 hops of 1 us.
  EXPECT_DOUBLE_EQ(allreduce_seconds(1e6, 4, link), 1.5 * 1e6 / 100e9 + 6e-6);
  // n = 2: one step each way, half the bytes per step.
  EXPECT_DOUBLE_EQ(allreduce_seconds(1e6, 2, link), 1e6 / 100e9 + 2e-6);
}

TEST(PerfParallel, APassPaysTwoAllReducesPerLayerAndAHandOffPerStage) {
  const model::Config& c = llama70b();
  Layout l = make_layout(4, 2, "", find_hardware("h100"));
  ASSERT_TRUE(l.link);
  EXPECT_EQ(l.link->id, "nvlink4");
  EXPECT_DOUBLE_EQ(l.link->bytes_per_s, 450e9);
  Pass p;
  p.new_tokens = 16;
  const double act = 16.0 * 8192 * 2;  // 16 tokens x d_model in 16 bits
  EXPECT_DOUBLE_EQ(comm_seconds(c, p, l, 2.0),
                   2 * 80 * allreduce_seconds(act, 4, *l.link) + 1 * (act / 450e9 + 0.6e-6));
}

TEST(PerfParallel, AShardHasItsShareOfHeadsColumnsAndVocabulary) {
  const model::Config& c = llama70b();  // 64 query heads, 8 KV heads, MLP 28672, vocabulary 128256
  const model::Config s4 = tp_shard(c, 4);
  EXPECT_EQ(s4.n_head, 16);
  EXPECT_EQ(s4.n_head_kv, 2);
  EXPECT_EQ(s4.n_ff, 7168);
  EXPECT_EQ(s4.n_vocab, 32064);
  EXPECT_EQ(s4.head_dim, 128);
  EXPECT_EQ(s4.n_embd, 8192);  // the residual stream is whole on every device
  // Beyond 8 devices each keeps one KV head: KV is replicated, not split further.
  const model::Config s16 = tp_shard(c, 16);
  EXPECT_EQ(s16.n_head, 4);
  EXPECT_EQ(s16.n_head_kv, 1);
}

TEST(PerfParallel, LayoutsTheModelCannotSplitEvenlyAreRejected) {
  const Hardware h100 = find_hardware("h100");
  auto msg = [&](int tp, int pp) {
    return test::error_of([&] { check_layout(llama70b(), make_layout(tp, pp, "", h100)); });
  };
  EXPECT_EQ(msg(3, 1), "--tp 3 does not divide the model's 64 query heads");
  EXPECT_EQ(test::error_of([&] { check_layout(resolve_model("smollm2-135m").config, make_layout(1, 31, "", h100)); }),
            "--pp 31 exceeds the model's 30 layers");
  EXPECT_EQ(test::error_of([&] { make_layout(2, 1, "", find_hardware("m2-ultra")); }),
            "hardware 'm2-ultra' has no default link between devices in the catalog; name one with --link (nvlink3, "
            "nvlink4, nvlink5, pcie4, pcie5)");
  EXPECT_EQ(make_layout(2, 1, "pcie5", find_hardware("m2-ultra")).link->id, "pcie5");
  EXPECT_EQ(test::error_of([] { find_link("nvlink9"); }),
            "unknown link 'nvlink9' (expected one of: nvlink3, nvlink4, nvlink5, pcie4, pcie5)");
}

TEST(PerfParallel, EachDeviceHoldsItsShareOfWeightsKvAndActivations) {
  const model::Config& c = llama70b();
  const Hardware h100 = find_hardware("h100");
  const MemoryShape shape{2.0, 2.0, 2.0, 1000, 1, 100};
  const ParamCount n = param_count(c);
  // Every matrix splits by 4 (64 heads, 8 KV heads, 28672 columns, 128256
  // rows of vocabulary all divide); the f32 norm gains are on every device.
  const DeviceMemory m = device_memory(c, make_layout(4, 1, "", h100), shape, h100.mem_bytes);
  EXPECT_NEAR(m.weights, n.matrices() * 2 / 4 + n.norms * 4, 1.0);
  EXPECT_DOUBLE_EQ(m.kv, 2.0 * 80 * (2 * 128) * 2 * 1000);  // 2 of the 8 KV heads
  EXPECT_DOUBLE_EQ(m.activations, 100.0 * (2 * 8192 + 2 * 7168) * 2 + 32064 * 4.0);
  EXPECT_DOUBLE_EQ(m.usable, 0.9 * 80e9);
  EXPECT_TRUE(m.fits());
  // Two stages: 40 layers each, and the embedding or the LM head, not both.
  const DeviceMemory p = device_memory(c, make_layout(4, 2, "", h100), shape, h100.mem_bytes);
  EXPECT_NEAR(p.weights, (n.layers / 2 + n.embedding) * 2 / 4 + n.norms * 4, 1.0);
  EXPECT_DOUBLE_EQ(p.kv, m.kv / 2);
  // One device: 141 GB of bf16 weights do not fit in 72 GB.
  EXPECT_FALSE(device_memory(c, Layout{}, shape, h100.mem_bytes).fits());
}

// Mixtral over 4 devices: each of the 8 experts splits its 14336 columns,
// the router (8 x 4096 per layer) stays whole on every device.
TEST(PerfParallel, EachExpertSplitsLikeADenseMlp) {
  const model::Config c = resolve_model("mixtral-8x7b").config;
  const Hardware h100 = find_hardware("h100");
  const model::Config s4 = tp_shard(c, 4);
  EXPECT_EQ(s4.n_ff_exp, 3584);
  EXPECT_EQ(s4.n_expert, 8);
  EXPECT_EQ(s4.n_expert_used, 2);
  const MemoryShape shape{2.0, 2.0, 2.0, 1000, 1, 100};
  const ParamCount n = param_count(c);
  const double router = 32.0 * 8 * 4096;
  const DeviceMemory m = device_memory(c, make_layout(4, 1, "", h100), shape, h100.mem_bytes);
  EXPECT_NEAR(m.weights, (n.matrices() - router) * 2 / 4 + router * 2 + n.norms * 4, 1.0);
  // A token's gate and up hold its 2 experts' 3584 columns each, and its 8 router logits.
  EXPECT_DOUBLE_EQ(m.activations, 100.0 * (2 * 4096 + 2 * 2 * 3584 + 8) * 2 + 8000 * 4.0);
  // It is the expert's width that must split evenly, not intermediate_size.
  model::Config odd = c;
  odd.n_ff_exp = 1000;
  EXPECT_EQ(test::error_of([&] { check_layout(odd, make_layout(16, 1, "", h100)); }),
            "--tp 16 does not divide the model's expert MLP width 1000");
}

TEST(PerfParallel, TheSmallestLayoutThatFitsIsSuggested) {
  const model::Config& c = llama70b();
  const Hardware h100 = find_hardware("h100"), rtx = find_hardware("rtx4090");
  const MemoryShape bf16{2.0, 2.0, 2.0, 2560, 1, 512};
  // 141 GB of bf16: 2 H100s (70.7 GB each of 72 usable).
  std::optional<FitSuggestion> f = smallest_fit(c, Layout{}, bf16, "bf16", h100.mem_bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->tp, 2);
  EXPECT_EQ(f->weights, "bf16");
  // 16 sequences of 8192 positions add 43 GB of KV: 8 RTX 4090s hold 17.7 +
  // 5.4 GB each of 21.6 usable in bf16; the widest narrower format, q8_0
  // (8.5 bits), fits on 8 (9.4 + 5.4 GB) and not on 4.
  const MemoryShape batch{2.0, 2.0, 2.0, 8192, 16, 1};
  f = smallest_fit(c, Layout{}, batch, "bf16", rtx.mem_bytes);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->weights, "q8_0");
  EXPECT_EQ(f->tp, 8);
  // The simulator reports it when the layout asked for does not fit.
  SimOptions o;
  o.prompt = 512;
  o.gen = 16;
  const Simulation s = simulate("llama-3.1-70b", c, h100, o);
  EXPECT_FALSE(s.fits);
  ASSERT_TRUE(s.suggestion);
  EXPECT_EQ(s.suggestion->tp, 2);
  o.layout = make_layout(4, 1, "", h100);
  const Simulation tp4 = simulate("llama-3.1-70b", c, h100, o);
  EXPECT_TRUE(tp4.fits);
  EXPECT_FALSE(tp4.suggestion);
}

TEST(PerfParallel, OneDevicePricesExactlyAsTimePass) {
  const ResolvedModel m = resolve_model("llama-3.1-8b");
  const Hardware h100 = find_hardware("h100");
  SimOptions o;
  o.prompt = 64;
  o.gen = 8;
  const Simulation s = simulate(m.id, m.config, h100, o);
  Pass p;
  p.new_tokens = 64;
  EXPECT_EQ(s.prefill.seconds, time_pass(m.config, p, s.machine).seconds);
  EXPECT_EQ(s.prefill.comm_s, 0.0);
  p.new_tokens = 1;
  p.past = 71;
  EXPECT_EQ(s.steps.back().cached.seconds, time_pass(m.config, p, s.machine).seconds);
}

TEST(PerfParallel, TensorParallelDecodeIsTheShardPlusTheLinks) {
  const ResolvedModel m = resolve_model("llama-3.1-8b");
  const Hardware rtx = find_hardware("rtx4090");
  SimOptions o;
  o.prompt = 64;
  o.gen = 1;
  const Simulation one = simulate(m.id, m.config, rtx, o);
  o.layout = make_layout(2, 1, "", rtx);
  const Simulation two = simulate(m.id, m.config, rtx, o);
  const PassTime& t = two.steps[0].cached;
  Pass p;
  p.past = 64;
  EXPECT_DOUBLE_EQ(t.seconds, time_pass(tp_shard(m.config, 2), p, two.machine).seconds + t.comm_s);
  // Over PCIe 4.0: 64 all-reduces of 8 kB, each 2 hops of 1 us plus 8 kB / 31.5 GB/s.
  EXPECT_NEAR(t.comm_s, 64 * (2e-6 + 8192.0 / 31.5e9), 1e-9);
  // Half the weights per device: faster, not twice as fast.
  const double speedup = one.steps[0].cached.seconds / t.seconds;
  EXPECT_GT(speedup, 1.5);
  EXPECT_LT(speedup, 2.0);
  EXPECT_TRUE(two.fits);
}

}  // namespace
}  // namespace kvlab::perf
