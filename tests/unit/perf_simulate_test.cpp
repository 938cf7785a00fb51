// The simulator: pass times, the no-cache crossover, memory fit, bad input,
// and the published-measurement check.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "common/error_text.h"
#include "common/hand_config.h"
#include "common/probed_machine.h"
#include "kernels/attention.h"
#include "lab/simulate/model_catalog.h"
#include "lab/simulate/simulate.h"
#include "lab/simulate/validate.h"

namespace kvlab::perf {
namespace {

using test::hand_config;

Machine ideal(double flops, double bw) {
  Machine m;
  m.peak_flops = m.flops = flops;
  m.peak_bytes_per_s = m.bytes_per_s = bw;
  return m;
}

TEST(PerfSimulate, AttentionChunkIsTheKernels) {
  // The simulator prices the engine's attention tasks with its own copy.
  EXPECT_EQ(kAttnChunk, kernels::kAttnChunk);
}

TEST(PerfSimulate, CrossoverOfTheTinyModelByHand) {
  // A no-cache step feeding T tokens (P = 0, 1-byte weights, 2-byte KV):
  //   FLOPs(T) = 44·T² + 2740·T + 192
  //     per layer: linear ops 1348·T, attention 44 per causal pair, pairs = T(T+1)/2;
  //     plus the final norm (32) and the LM head (160) for the last token.
  //   bytes(T) = 1392 + 8·min(T, 10) + 64·T
  //     fixed weights 1392, embedding rows 8 each, KV written and read 32 per token per layer.
  // On a machine with a ridge of 100 FLOP/byte, compute wins when
  //   44·T² − 3660·T − 147008 ≥ 0  (T ≥ 10)  ⇔  T ≥ 112.8, so T = 113, position 112.
  Pass shape;
  shape.weight_bytes = 1.0;
  shape.kv_bytes = 2.0;
  Pass p = shape;
  p.new_tokens = 3;
  EXPECT_DOUBLE_EQ(forward_cost(hand_config(), p).flops(), 44.0 * 9 + 2740.0 * 3 + 192);
  EXPECT_DOUBLE_EQ(forward_cost(hand_config(), p).dram_bytes(), 1392.0 + 8 * 3 + 64 * 3);

  const Machine m = ideal(100e9, 1e9);
  EXPECT_EQ(nocache_crossover(hand_config(), shape, m), std::optional<int64_t>(112));
  p.new_tokens = 112;
  EXPECT_EQ(time_pass(hand_config(), p, m).bound, Bound::Memory);
  p.new_tokens = 113;
  EXPECT_EQ(time_pass(hand_config(), p, m).bound, Bound::Compute);
}

TEST(PerfSimulate, CrossoverMatchesAScanOnARealModel) {
  const model::Config c = resolve_model("llama-3.1-8b").config;
  const Machine m = make_machine(find_hardware("h100"), Precision::BF16, Efficiency{});
  Pass shape;
  const int64_t x = *nocache_crossover(c, shape, m);
  for (int64_t t = std::max<int64_t>(1, x - 3); t <= x + 3; ++t) {
    Pass p = shape;
    p.new_tokens = t;
    EXPECT_EQ(time_pass(c, p, m).bound == Bound::Compute, t >= x + 1) << t;
  }
  // Roughly where 2·N·T / (N · 2 bytes) reaches the ridge: T ≈ ridge.
  EXPECT_NEAR(double(x), m.flops / m.bytes_per_s, 0.15 * m.flops / m.bytes_per_s);
}

TEST(PerfSimulate, PassTimeIsARooflinePlusOverhead) {
  Machine m = ideal(1e12, 1e9);
  m.layer_overhead_s = 1e-3;
  Pass p;
  p.weight_bytes = 1;
  const PassTime t = time_pass(hand_config(), p, m);
  EXPECT_EQ(t.bound, Bound::Memory);
  EXPECT_DOUBLE_EQ(t.memory_s, t.bytes / 1e9);
  EXPECT_DOUBLE_EQ(t.overhead_s, 2e-3);
  EXPECT_DOUBLE_EQ(t.seconds, t.memory_s + 2e-3);
}

// DenseAndAttentionAreTwoRooflinesInSequence's decode step: one token after
// 3 cached, weights of 1 byte and K/V of 2 bytes per element.
Pass hand_decode_step() {
  Pass p;
  p.past = 3;
  p.weight_bytes = 1.0;
  p.kv_bytes = 2.0;
  return p;
}

TEST(PerfSimulate, DenseAndAttentionAreTwoRooflinesInSequence) {
  // Decode at position 3 (T = 1, P = 3), 1-byte weights, 2-byte KV:
  //   matmul FLOPs       2 · 1152 + 160 = 2464  (q, k, v, o, gate, up, down per layer; LM head)
  //   element-wise FLOPs 2 · 196 + 32 = 424     (norms, RoPE, SiLU·up, residuals per layer; output norm)
  //   attention FLOPs    2 layers · 44 FLOP · 4 pairs = 352
  //   weight bytes       1392 + 8 (one embedding row) = 1400
  //   KV bytes           per layer: K and V written 8 + 8, read 32 + 32: 2 · 80 = 160
  //   weight rows, matmul jobs 138, 9 (perf_cost_test)
  // Matmuls at 1000 FLOP/s, element-wise at 212, attention at 100 (one
  // token: the decode rate), 1000 bytes/s, 0.01 s per weight row, 0.02 s
  // per matmul call. Each job under its own roof, max(compute, bytes + rows + calls):
  //   QKV        max(0.512, 0.256 + 0.32 + 0.04) = 0.616 s
  //   O          max(0.256, 0.128 + 0.16 + 0.04) = 0.328 s
  //   gate + up  max(1.024, 0.512 + 0.64 + 0.04) = 1.192 s
  //   down       max(0.512, 0.256 + 0.16 + 0.04) = 0.512 s
  //   LM head    max(0.16,  0.08  + 0.1  + 0.02) = 0.2 s
  //   element-wise: 424 FLOP at 212/s against the norm gains' 160 bytes and the embedding row's 8: 2 s
  //   dense      4.848 s; one max over the dense group would give max(2.464 + 2, 2.96) = 4.464 s
  //   attention  max(3.52, 0.16)            = 3.52 s   (compute)
  // One roofline over the whole pass would give max(3.24, 1.56) = 3.24 s.
  Machine m = ideal(1e3, 1e3);
  m.elementwise_flops = 212;
  m.attention_decode_flops = 100;
  m.row_s = 0.01;
  m.call_s = 0.02;
  Pass p = hand_decode_step();
  const PassTime t = time_pass(hand_config(), p, m);
  EXPECT_DOUBLE_EQ(t.flops, 3240.0);
  EXPECT_DOUBLE_EQ(t.bytes, 1560.0);
  EXPECT_DOUBLE_EQ(t.dense_s, 0.616 + 0.328 + 1.192 + 0.512 + 0.2 + 2.0);
  EXPECT_DOUBLE_EQ(t.attention_s, 3.52);
  EXPECT_DOUBLE_EQ(t.seconds, 4.848 + 3.52);
  EXPECT_DOUBLE_EQ(t.compute_s, 4.464 + 3.52);
  EXPECT_DOUBLE_EQ(t.memory_s, 1.4 + 1.38 + 0.18 + 0.16);
  EXPECT_EQ(t.bound, Bound::Compute);
  // Two tokens (positions 3 and 4 see 4 + 5 = 9 positions): the many-token
  // attention rate, here unset, so the matmul one: 2 · 44 · 9 = 792 FLOP at
  // 1000/s = 0.792 s; KV 2 · (16 + 16 + 2 · 40) = 224 bytes, 0.224 s.
  p.new_tokens = 2;
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, m).attention_s, 0.792);
  // The engine's tasks: one per token and KV head, 2 here. On 1 thread no
  // tail; on 3 threads the slowest runs 1, not 2/3: x 1.5; on 4 threads, x 2
  // (2 tasks < 2 per thread: each is split into kAttnChunk-position chunks, but 5
  // positions make one chunk).
  m.threads = 1;
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, m).attention_s, 0.792);
  m.threads = 3;
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, m).attention_s, 0.792 * 1.5);
  m.threads = 4;
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, m).attention_s, 0.792 * 2);
}

TEST(PerfSimulate, APassThatFitsInTheCachesReadsAtTheirRate) {
  // The decode step of DenseAndAttentionAreTwoRooflinesInSequence reads 1560
  // bytes. With the curve below it is read 2x faster than from DRAM (the
  // largest size): every byte term halves, the compute terms stay.
  Machine m = ideal(1e9, 1e3);
  const Pass p = hand_decode_step();
  const PassTime dram = time_pass(hand_config(), p, m);
  EXPECT_EQ(dram.bound, Bound::Memory);
  m.read_bw_by_size = {{2000, 2e3}, {1e6, 1e3}};
  const PassTime cached = time_pass(hand_config(), p, m);
  EXPECT_DOUBLE_EQ(cached.bytes, 1560.0);
  EXPECT_DOUBLE_EQ(cached.memory_s, dram.memory_s / 2);
  EXPECT_NEAR(cached.seconds, dram.seconds / 2, 1e-9 * dram.seconds);
  // A working set past the curve's end is priced at DRAM's rate.
  m.read_bw_by_size = {{100, 2e3}, {1000, 1e3}};
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, m).memory_s, dram.memory_s);
}

// The probed machine of tests/common/probed_machine.h.
Hardware probed() { return test::probed_machine(); }

TEST(PerfSimulate, TheCurveScalesTheBandwidthFromTheWorkingSetItWasMeasuredOver) {
  // The same pass, 1560 bytes, and a curve that reads 1000 bytes at 4e3/s,
  // 2000 at 2e3/s and 1e6 (DRAM) at 1e3/s; log-interpolated, 1560 bytes
  // read at 4e3 - 2e3 * log(1.56) / log(2) B/s.
  Machine m = ideal(1e9, 1e3);
  const Pass p = hand_decode_step();
  const double dram_s = time_pass(hand_config(), p, m).memory_s;
  m.read_bw_by_size = {{1000, 4e3}, {2000, 2e3}, {1e6, 1e3}};
  const double at_1560 = 4e3 - 2e3 * std::log(1.56) / std::log(2.0);
  EXPECT_NEAR(time_pass(hand_config(), p, m).memory_s, dram_s * 1e3 / at_1560, 1e-12);
  // bytes_per_s measured over 2000 bytes already holds that size's 2x: the
  // pass is read at at_1560 / 2e3 of it, not at_1560 / 1e3.
  m.bandwidth_working_set_bytes = 2000;
  EXPECT_NEAR(m.read_speedup(1560), at_1560 / 2e3, 1e-12);
  EXPECT_NEAR(time_pass(hand_config(), p, m).memory_s, dram_s * 2e3 / at_1560, 1e-12);
  // A pass larger than the reference reads slower than it: DRAM at half.
  EXPECT_DOUBLE_EQ(m.read_speedup(1e7), 0.5);
  // The probed efficiencies carry the reference from the profile.
  Hardware hw = probed();
  hw.kernels->gemv_working_set_bytes = 2000;
  const model::Config c = hand_config();
  EXPECT_DOUBLE_EQ(make_machine(hw, Precision::INT8, efficiency_for(hw, "q4_1", "f16", c)).bandwidth_working_set_bytes,
                   2000);
}

TEST(PerfSimulate, AManyTokenPassPaysEachAttentionTasksFixedCost) {
  // Attention of DenseAndAttentionAreTwoRooflinesInSequence's two-token pass:
  // 792 FLOP at 1000/s. With 0.1 s per (token, KV head) task, its 2 tokens x
  // 1 KV head x 2 layers add 0.4 s. A one-token pass is priced at the decode
  // rate, measured on its own shape, with no task cost.
  Machine m = ideal(1e3, 1e9);
  m.attention_task_s = 0.1;
  Pass p;
  p.past = 3;
  p.new_tokens = 2;
  p.weight_bytes = 1.0;
  p.kv_bytes = 2.0;
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, m).attention_s, 0.792 + 0.4);
  p.new_tokens = 1;
  Machine no_task = m;
  no_task.attention_task_s = 0;
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, m).attention_s, time_pass(hand_config(), p, no_task).attention_s);
  // The probe's figure reaches the machine through the efficiencies.
  Hardware hw = probed();
  hw.kernels->attention[2].prefill_task_s = 5e-7;  // f16, head_dim 64, passes of 3
  model::Config c = hand_config();
  c.head_dim = 64;
  c.n_head = 3;
  const Efficiency e = efficiency_for(hw, "q4_1", "f16", c);
  EXPECT_DOUBLE_EQ(e.attention_task_s, 5e-7);
  EXPECT_DOUBLE_EQ(make_machine(hw, Precision::INT8, e).attention_task_s, 5e-7);
}

TEST(PerfSimulate, AComputeBoundMatmulPaysEachTokensInputColumnsAndOutputRows) {
  // A 3-token prefill of the tiny model on a machine of 1000 FLOP/s and fast
  // memory: every matmul job is compute-bound. Per layer the jobs convert
  // 8 + 8 + 8 + 16 = 40 input columns and store 64 output rows per token;
  // the LM head, 8 and 10, for the one token that needs logits. At 0.01 s
  // per input column and 0.001 s per output row the dense time grows by
  // 3 tokens x 2 layers x (0.4 + 0.064) + (0.08 + 0.01) = 2.874 s.
  Machine m = ideal(1e3, 1e12);
  Pass p;
  p.new_tokens = 3;
  p.weight_bytes = 1.0;
  const PassTime base = time_pass(hand_config(), p, m);
  m.matmul_input_s = 0.01;
  m.matmul_output_s = 0.001;
  const PassTime t = time_pass(hand_config(), p, m);
  EXPECT_NEAR(t.dense_s - base.dense_s, 2.874, 1e-12);
  EXPECT_NEAR(t.compute_s - base.compute_s, 2.874, 1e-12);
  EXPECT_DOUBLE_EQ(t.attention_s, base.attention_s);
  // The probe's figures reach the machine through the efficiencies.
  Hardware hw = probed();
  hw.kernels->matmul[0].gemm_input_s = 4e-10;  // q4_1
  hw.kernels->matmul[0].gemm_output_s = 1e-10;
  const Efficiency e = efficiency_for(hw, "q4_1", "f16", hand_config());
  EXPECT_DOUBLE_EQ(e.matmul_input_s, 4e-10);
  EXPECT_DOUBLE_EQ(e.matmul_output_s, 1e-10);
  const Machine probed_m = make_machine(hw, Precision::INT8, e);
  EXPECT_DOUBLE_EQ(probed_m.matmul_input_s, 4e-10);
  EXPECT_DOUBLE_EQ(probed_m.matmul_output_s, 1e-10);
  Efficiency absurd = e;
  absurd.matmul_output_s = 2e-6;
  EXPECT_THROW(make_machine(hw, Precision::INT8, absurd), Error);
}

TEST(PerfSimulate, ACpuDoesEachFurtherTokensArithmeticAfterTheWeightRead) {
  // Decode of 3 sequences of the tiny model: per token its matmul jobs do
  // 2 x (128 + 64 + 256 + 128) + 80 = 1232 multiply-adds over as many 1-byte
  // weights. At 1000 FLOP/s and 1000 B/s a job of T tokens computes for
  // 2·T·MACs / 1000 s and reads for MACs / 1000 s: a GPU takes the larger
  // (6 x 1.232 s at 3 tokens), a CPU the read and then 2 of the 3 tokens'
  // arithmetic (1.232 + 4 x 1.232 s).
  Machine gpu = ideal(1e3, 1e3);
  Machine cpu = gpu;
  cpu.reads_hide_arithmetic = false;
  Pass p;
  p.past = 3;
  p.batch = 3;
  p.weight_bytes = 1.0;
  EXPECT_NEAR(time_pass(hand_config(), p, gpu).dense_s - time_pass(hand_config(), p, cpu).dense_s, 1.232, 1e-9);
  // One token: the read alone (the one-token rate holds its arithmetic),
  // where the GPU's 2.464 s of arithmetic outlast it.
  p.batch = 1;
  EXPECT_NEAR(time_pass(hand_config(), p, gpu).dense_s - time_pass(hand_config(), p, cpu).dense_s, 1.232, 1e-9);
  EXPECT_DOUBLE_EQ(time_pass(hand_config(), p, cpu).attention_s, time_pass(hand_config(), p, gpu).attention_s);
  // The hardware's kind decides.
  EXPECT_FALSE(make_machine(probed(), Precision::INT8, Efficiency{}).reads_hide_arithmetic);
  EXPECT_TRUE(make_machine(find_hardware("h100"), Precision::BF16, Efficiency{}).reads_hide_arithmetic);
}

TEST(PerfSimulate, AProbedCpuFollowsKvlabsPassCurve) {
  // SmolLM2-135M q4_1 on 2 Zen 4 cores, figures of that machine's probe
  // (q4_1: 44 GB/s decode, 0.66 Top/s prefill of a 2-core 0.94 Top/s int8
  // peak). kvlab bench -p T -n 0 there: pp1, 16, 64 and 128 took 2.23,
  // 8.20, 27.6 and 56.1 ms: 3.7x, 12.4x and 25x pass(1). A 16-token chunk
  // priced as its arithmetic alone (the larger of read and arithmetic) came
  // out at 2.9x.
  const model::Config c = resolve_model("smollm2-135m").config;
  Hardware hw = probed();
  hw.mem_bw = 3.5e10;
  hw.int8 = 9.4e11;
  hw.kernels->matmul[0] = {"q4_1", 4.4e10, 0, 1e-6, 6.6e11, 1.8e-10, 1.1e-10};
  const Machine m = make_machine(hw, Precision::INT8, efficiency_for(hw, "q4_1", "f16", c));
  auto pass_ms = [&](int tokens) {
    Pass p;
    p.new_tokens = tokens;
    p.weight_bytes = 5.0 / 8;  // q4_1: 5 bits per weight
    return time_pass(c, p, m).seconds * 1e3;
  };
  const double one = pass_ms(1);
  EXPECT_GT(pass_ms(16) / one, 3.0);
  EXPECT_LT(pass_ms(16) / one, 4.4);
  EXPECT_GT(pass_ms(64) / one, 10.0);
  EXPECT_LT(pass_ms(64) / one, 15.0);
  EXPECT_GT(pass_ms(128) / one, 20.0);
  EXPECT_LT(pass_ms(128) / one, 30.0);
}

TEST(PerfSimulate, AGpuReadsOnceForASmallBatch) {
  // A GPU's batched decode hides its few tokens' arithmetic under one
  // weight read for all its sequences.
  const model::Config c = resolve_model("smollm2-135m").config;
  const Hardware& h100 = find_hardware("h100");
  const Efficiency e = efficiency_for(h100, "q4_1", "f16", c);
  const Machine m = make_machine(h100, Precision::BF16, e);
  Pass p;
  p.past = 150;
  const double one = time_pass(c, p, m).seconds;
  p.batch = 4;
  EXPECT_LT(time_pass(c, p, m).seconds / one, 1.1);
}

TEST(PerfSimulate, EfficienciesOfAProbedMachineAreItsKernelsOverItsPeaks) {
  const model::Config c = resolve_model("smollm2-135m").config;  // head_dim 64
  const Hardware h = probed();
  EXPECT_EQ(dense_precision(h, weight_format("q4_1")), Precision::INT8);  // integer weights on a CPU
  EXPECT_EQ(dense_precision(h, weight_format("f16")), Precision::FP16);   // priced at fp32 (no 16-bit peak)
  EXPECT_EQ(dense_precision(find_hardware("h100"), weight_format("q4_1")), Precision::FP16);  // priced at bf16's rate
  const Efficiency e = efficiency_for(h, "q4_1", "f16", c);
  EXPECT_DOUBLE_EQ(e.bandwidth, 5e9 / 2e10);  // of the best read bandwidth
  EXPECT_DOUBLE_EQ(e.compute, 5e10 / 2e11);   // of the int8 peak
  // f16 KV: 16-bit math, which this CPU prices at fp32.
  EXPECT_DOUBLE_EQ(*e.attention, 1.5e10 / 1e11);
  EXPECT_DOUBLE_EQ(*e.attention_decode, 1e10 / 1e11);
  EXPECT_DOUBLE_EQ(*e.elementwise, 3e9 / 1e11);
  EXPECT_DOUBLE_EQ(e.row_s, 2e-8);
  EXPECT_DOUBLE_EQ(e.call_s, 3e-6);
  EXPECT_EQ(e.threads, 2);
  EXPECT_DOUBLE_EQ(e.layer_overhead_s, 6e-6);  // 6 element-wise thread-pool jobs per layer
  EXPECT_NE(e.source.find("kvlab probe"), std::string::npos) << e.source;
  // The nearest head width measured: 100 is closer to 128 than to 64.
  model::Config wide = c;
  wide.head_dim = 100;
  EXPECT_DOUBLE_EQ(*efficiency_for(h, "q4_1", "f16", wide).attention, 0.25);
  // A group is priced as the kernels' passes of up to 4 query heads: 4 (12 /
  // 16 GFLOP/s) + 1 (4 / 6) for a group of 5, the time of each pass by the
  // share of the pairs it does: rate = 5 / (4 / r4 + 1 / r1).
  model::Config five = c;
  five.n_head = 5 * c.n_head_kv;
  const Efficiency e5 = efficiency_for(h, "q4_1", "f16", five);
  EXPECT_DOUBLE_EQ(*e5.attention, 5 / (4 / 1.6e10 + 1 / 6e9) / 1e11);  // 12 GFLOP/s
  EXPECT_DOUBLE_EQ(*e5.attention_decode, 5 / (4 / 1.2e10 + 1 / 4e9) / 1e11);
  EXPECT_NE(e5.source.find("in groups of 5"), std::string::npos) << e5.source;
  // One pass of 2 heads: that width's own rates.
  model::Config two = c;
  two.n_head = 2 * c.n_head_kv;
  EXPECT_DOUBLE_EQ(*efficiency_for(h, "q4_1", "f16", two).attention, 0.12);
  // A format or KV type it did not time, and catalog hardware: the defaults.
  for (const Efficiency& d : {efficiency_for(h, "q8_0", "f16", c), efficiency_for(h, "q4_1", "q8_0", c),
                              efficiency_for(find_hardware("h100"), "q4_1", "f16", c)}) {
    EXPECT_DOUBLE_EQ(d.bandwidth, 0.8);
    EXPECT_DOUBLE_EQ(d.compute, 0.6);
    EXPECT_FALSE(d.attention);
    EXPECT_EQ(d.threads, 0);
    EXPECT_EQ(d.source, "defaults");
  }
  // A rate above the (separately measured) peak counts as the peak.
  Hardware fast = h;
  fast.kernels->matmul[0].gemm_ops_per_s = 3e11;
  EXPECT_DOUBLE_EQ(efficiency_for(fast, "q4_1", "f16", c).compute, 1.0);
}

TEST(PerfSimulate, AProbedMachinePricesEachGroupAtItsOwnRate) {
  const model::Config c = resolve_model("smollm2-135m").config;  // 9 query heads
  const Hardware h = probed();
  SimOptions o;
  o.prompt = 1024;
  o.gen = 1;
  o.weights = "q4_1";
  o.eff = efficiency_for(h, o.weights, o.kv, c);
  const Simulation s = simulate("smollm2-135m", c, h, o);
  EXPECT_EQ(s.machine.precision, Precision::INT8);
  EXPECT_DOUBLE_EQ(s.machine.flops, 5e10);
  EXPECT_EQ(s.machine.attention_precision, Precision::FP32);
  EXPECT_DOUBLE_EQ(s.machine.attention_rate(), 1.5e10);
  EXPECT_DOUBLE_EQ(s.machine.attention_decode_rate(), 1e10);
  EXPECT_DOUBLE_EQ(s.machine.elementwise_rate(), 3e9);
  EXPECT_DOUBLE_EQ(s.machine.bytes_per_s, 5e9);
  // Cached decode at position 1024: the weights stream (bytes and rows);
  // attention over 1025 positions at the decode rate: 3 KV heads, fewer
  // than 2 per thread, so each splits into ceil(1025 / kAttnChunk) chunks
  // (5 for 256), 3 times that many tasks on 2 threads, the slowest running
  // the larger half (8 of 15: x 16/15).
  Pass p;
  p.past = 1024;
  p.weight_bytes = s.weight_bits / 8;
  const Cost cost = forward_cost(c, p);
  const PassTime& d = s.steps[0].cached;
  // Every matmul job is memory-bound; the element-wise ops, at 3e9 FLOP/s,
  // take longer than the norm gains and the embedding row they read.
  double matmul_bytes = 0, ew_flops = 0;
  for (Op op : {Op::Q, Op::K, Op::V, Op::O, Op::Gate, Op::Up, Op::Down, Op::LmHead})
    matmul_bytes += cost[op].weight_bytes;
  for (Op op : {Op::AttnNorm, Op::Rope, Op::FfnNorm, Op::SiluMul, Op::Residual, Op::OutputNorm})
    ew_flops += cost[op].flops;
  ASSERT_GT(ew_flops / 3e9, (cost.total().weight_bytes - matmul_bytes) / 5e9);
  EXPECT_DOUBLE_EQ(d.dense_s,
                   matmul_bytes / 5e9 + matmul_rows(c) * 2e-8 + matmul_calls(c) * 3e-6 + ew_flops / 3e9);
  const double tasks = 3 * std::ceil(1025.0 / kAttnChunk), slowest = std::ceil(tasks / 2);
  EXPECT_DOUBLE_EQ(d.attention_s,
                   (cost[Op::Scores].flops + cost[Op::Softmax].flops + cost[Op::AttnV].flops) / 1e10 * (2 * slowest / tasks));
  EXPECT_EQ(d.bound, Bound::Memory);
  EXPECT_EQ(s.prefill.bound, Bound::Compute);
  EXPECT_EQ(s.steps[0].naive.bound, Bound::Compute);
}

TEST(PerfSimulate, EightBOnH100WithAndWithoutCache) {
  const ResolvedModel m = resolve_model("llama-3.1-8b");
  SimOptions o;
  o.prompt = 128;
  o.gen = 512;
  const Simulation s = simulate(m.id, m.config, find_hardware("h100"), o);
  ASSERT_EQ(s.steps.size(), 512u);
  EXPECT_EQ(s.steps.front().position, 128);
  // Cached decode reads ~15 GB per step: memory-bound, ~150 tok/s, nearly flat.
  for (const Step& st : s.steps) EXPECT_EQ(st.cached.bound, Bound::Memory);
  const double first = 1.0 / s.steps.front().cached.seconds, last = 1.0 / s.steps.back().cached.seconds;
  EXPECT_GT(first, 120);
  EXPECT_LT(first, 180);
  EXPECT_LT((first - last) / first, 0.02);
  // No cache: the first step costs a prefill of 129 tokens; it slows as the sequence grows.
  EXPECT_GT(s.steps.back().naive.seconds, 2 * s.steps.front().naive.seconds);
  EXPECT_EQ(s.steps.back().naive.bound, Bound::Compute);
  EXPECT_GT(s.total_naive_s, s.total_cached_s);
  // Memory: 16.06 GB of weights + 131 kB per position.
  EXPECT_NEAR(s.weight_bytes / 1e9, 16.06, 0.01);
  EXPECT_DOUBLE_EQ(s.kv_bytes_final, 131072.0 * 640);
  EXPECT_TRUE(s.fits);
  ASSERT_TRUE(s.crossover);
  EXPECT_GT(*s.crossover, 128);
  EXPECT_LT(*s.crossover, 640);

  // 70B in bf16 (141 GB) does not fit an 80 GB H100.
  const ResolvedModel big = resolve_model("llama-3.1-70b");
  o.gen = 4;
  EXPECT_FALSE(simulate(big.id, big.config, find_hardware("h100"), o).fits);
}

TEST(PerfSimulate, BadInputsAreRejected) {
  const ResolvedModel m = resolve_model("smollm2-135m");
  const Hardware hw = find_hardware("l4");
  auto msg = [&](SimOptions o) { return test::error_of([&] { simulate(m.id, m.config, hw, o); }); };
  SimOptions o;
  o.prompt = 0;
  EXPECT_EQ(msg(o), "--prompt must be at least 1 token");
  o = {};
  o.batch = 0;
  EXPECT_EQ(msg(o), "--batch must be at least 1");
  o = {};
  o.eff.bandwidth = 0;
  EXPECT_EQ(msg(o), "bandwidth efficiency must be in (0, 1], got 0");
  o = {};
  o.weights = "q3_k";
  EXPECT_EQ(msg(o), "unknown weight format 'q3_k' (expected one of: f32, f16, bf16, fp8, int8, q8_0, q4_1, q4_0, q6_k, q5_1, q5_0, q5_k, q4_k)");
  o = {};
  o.kv = "int8";
  EXPECT_EQ(msg(o), "unknown KV cache format 'int8' (expected one of: f32, f16, bf16, fp8, q8_0, q4_0)");
}

// docs/validation/published.md explains every bound below.
TEST(PerfValidate, PublishedMeasurementsAreWithinTheirDocumentedBounds) {
  const std::vector<Measurement> ms =
      load_measurements(std::string(KVLAB_SOURCE_DIR) + "/docs/validation/published.json");
  ASSERT_GE(ms.size(), 30u);
  const Validation v = validate(ms, Efficiency{});
  size_t multi_device = 0, outliers = 0;
  double log_defaults = 0, log_loo = 0;
  for (const ValidationRow& r : v.rows) {
    if (r.m.tp * r.m.pp > 1) ++multi_device;
    // Two rows are marked as outliers, with the reason, and enter no fit:
    // llama.cpp's H100 prefill without Hopper kernels, and an experimental
    // tensor-parallel path.
    if (!r.m.outlier.empty()) {
      ++outliers;
      continue;
    }
    // The default efficiencies describe tuned GPU kernels; CPU prefill (three
    // rows, two CPUs) runs at a quarter of the int8 peak, not 0.6.
    const bool cpu_prefill = r.device_class == MemoryClass::Ddr && !r.m.decode();
    EXPECT_GT(r.ratio, 0.5) << r.m.id;
    EXPECT_LT(r.ratio, cpu_prefill ? 2.5 : 2.01) << r.m.id;
    // Leave-one-out, each row from the other rows of its class and metric.
    EXPECT_GT(r.loo_ratio, 0.65) << r.m.id;
    EXPECT_LT(r.loo_ratio, 1.5) << r.m.id;
    log_defaults += std::log(r.ratio);
    log_loo += std::log(r.loo_ratio);
  }
  EXPECT_GE(multi_device, 3u);
  EXPECT_EQ(outliers, 2u);
  const double n = double(v.rows.size() - outliers);
  EXPECT_LT(std::fabs(log_defaults / n), std::log(1.4));  // the defaults: geometric mean within 40%
  EXPECT_LT(std::fabs(log_loo / n), std::log(1.05));      // leave-one-out: within 5%
}

TEST(PerfValidate, LeaveOneOutNeverFitsTheRowItPredicts) {
  // Two rows of one class and metric: each is predicted from the other
  // alone, so a row's own measurement cannot move its prediction.
  auto row = [](const char* id, double measured) {
    Measurement m;
    m.id = id;
    m.engine = m.source = m.url = m.conditions = "test";
    m.hardware = "rtx4090";
    m.model = "llama-2-7b";
    m.weights = "f16";
    m.metric = "decode_tok_s";
    m.gen = 16;
    m.measured = measured;
    return m;
  };
  const Validation a = validate({row("a", 40), row("b", 50)}, Efficiency{});
  const Validation b = validate({row("a", 80), row("b", 50)}, Efficiency{});
  EXPECT_DOUBLE_EQ(a.rows[0].loo_predicted, b.rows[0].loo_predicted);
  EXPECT_NE(a.rows[1].loo_predicted, b.rows[1].loo_predicted);
  // One other row: its efficiency alone is fitted, the fixed cost stays the default's.
  EXPECT_DOUBLE_EQ(a.rows[0].loo_fixed_s, Efficiency{}.layer_overhead_s);
  EXPECT_EQ(a.rows[0].loo_rows, 1);
  EXPECT_NEAR(a.rows[0].loo_predicted, 50, 1e-6);  // "b" fitted exactly, and the rows have the same shape
}

TEST(PerfValidate, MeasurementErrorsNameTheEntry) {
  try {
    parse_measurements(R"({"measurements": [{"id": "x"}]})", "m.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "m.json: measurements[0]: field 'engine' missing");
  }
}

}  // namespace
}  // namespace kvlab::perf
