// perf::Cost on configurations small enough to count by hand, and on real
// models against published parameter counts.
#include <gtest/gtest.h>

#include "common/hand_config.h"
#include "lab/cost/cost.h"
#include "lab/simulate/model_catalog.h"

namespace kvlab::perf {
namespace {

using test::hand_config;

Pass pass(int64_t t, int64_t past, int64_t batch = 1) {
  Pass p;
  p.new_tokens = t;
  p.past = past;
  p.batch = batch;
  p.weight_bytes = 1.0;
  p.kv_bytes = 2.0;
  p.act_bytes = 4.0;
  return p;
}

TEST(PerfCost, MatmulRowsOfATinyModelByHand) {
  // Per layer: q 8 + k 4 + v 4 + o 8 + gate 16 + up 16 + down 8 = 64 output
  // features; 2 layers and the LM head's 10: 138.
  EXPECT_DOUBLE_EQ(matmul_rows(hand_config()), 138.0);
  EXPECT_DOUBLE_EQ(matmul_calls(hand_config()), 9.0);  // 4 jobs per layer (QKV, O, gate+up, down), the LM head
  // Input columns, once per call: d 8 (QKV) + q_dim 8 (O) + d 8 (gate, up) +
  // d_ff 16 (down) = 40 per layer; 2 layers and the LM head's 8: 88.
  EXPECT_DOUBLE_EQ(matmul_inputs(hand_config()), 88.0);
}

TEST(PerfCost, EveryOpOfATinyPassByHand) {
  // T = 3 new tokens after P = 2 cached: query i sees 3 + i positions, so
  // the causal pairs are 3 + 4 + 5 = 12 = T·P + T(T+1)/2.
  const Cost c = forward_cost(hand_config(), pass(3, 2));
  // Per layer x 2 layers.
  EXPECT_DOUBLE_EQ(c[Op::AttnNorm].flops, 2 * (4.0 * 3 * 8));  // 4 FLOP per element
  EXPECT_DOUBLE_EQ(c[Op::Q].flops, 2 * (2.0 * 3 * 8 * 8));     // 2·T·d·q_dim
  EXPECT_DOUBLE_EQ(c[Op::K].flops, 2 * (2.0 * 3 * 8 * 4));     // 2·T·d·kv_dim
  EXPECT_DOUBLE_EQ(c[Op::V].flops, c[Op::K].flops);
  EXPECT_DOUBLE_EQ(c[Op::Rope].flops, 2 * (3.0 * 4 * (2 + 1) * 3));  // 3 per rotated dim, Q and K heads
  EXPECT_DOUBLE_EQ(c[Op::Scores].flops, 2 * (2.0 * 4 * 2 * 12));     // 2·head_dim·heads·pairs
  EXPECT_DOUBLE_EQ(c[Op::Softmax].flops, 2 * (6.0 * 2 * 12));        // 6 per score
  EXPECT_DOUBLE_EQ(c[Op::AttnV].flops, c[Op::Scores].flops);
  EXPECT_DOUBLE_EQ(c[Op::O].flops, 2 * (2.0 * 3 * 8 * 8));
  EXPECT_DOUBLE_EQ(c[Op::Gate].flops, 2 * (2.0 * 3 * 8 * 16));
  EXPECT_DOUBLE_EQ(c[Op::Up].flops, c[Op::Gate].flops);
  EXPECT_DOUBLE_EQ(c[Op::Down].flops, c[Op::Gate].flops);
  EXPECT_DOUBLE_EQ(c[Op::SiluMul].flops, 2 * (5.0 * 3 * 16));  // 5 per element
  EXPECT_DOUBLE_EQ(c[Op::Residual].flops, 2 * (2.0 * 3 * 8));
  EXPECT_DOUBLE_EQ(c[Op::Embedding].flops, 0.0);
  EXPECT_DOUBLE_EQ(c[Op::OutputNorm].flops, 4.0 * 8);  // last token only
  EXPECT_DOUBLE_EQ(c[Op::LmHead].flops, 2.0 * 8 * 10);
  EXPECT_DOUBLE_EQ(c.flops(), 9336.0);

  // Weights: rows·cols·bytes, once per pass; norm gains are f32.
  EXPECT_DOUBLE_EQ(c[Op::Q].weight_bytes, 2 * 64.0);
  EXPECT_DOUBLE_EQ(c[Op::K].weight_bytes, 2 * 32.0);
  EXPECT_DOUBLE_EQ(c[Op::Gate].weight_bytes, 2 * 128.0);
  EXPECT_DOUBLE_EQ(c[Op::AttnNorm].weight_bytes, 2 * 8 * 4.0);
  EXPECT_DOUBLE_EQ(c[Op::Embedding].weight_bytes, 3 * 8.0);  // only the rows looked up
  EXPECT_DOUBLE_EQ(c[Op::LmHead].weight_bytes, 80.0);
  EXPECT_DOUBLE_EQ(c.total().weight_bytes, 1416.0);

  // KV: write T = 3 positions, read P + T = 5, K and V, 4 wide, 2 bytes, 2 layers.
  EXPECT_DOUBLE_EQ(c[Op::K].kv_bytes, 2 * 3 * 4 * 2.0);
  EXPECT_DOUBLE_EQ(c[Op::Scores].kv_bytes, 2 * 5 * 4 * 2.0);
  EXPECT_DOUBLE_EQ(c[Op::AttnV].kv_bytes, 2 * 5 * 4 * 2.0);
  EXPECT_DOUBLE_EQ(c.total().kv_bytes, 96.0 + 160.0);
  EXPECT_DOUBLE_EQ(c.dram_bytes(), 1416.0 + 256.0);

  // Activations are counted, but kept out of dram_bytes().
  EXPECT_DOUBLE_EQ(c[Op::Q].act_bytes, 2 * 3 * (8 + 8) * 4.0);
  EXPECT_GT(c.total().act_bytes, 0.0);
}

TEST(PerfCost, Qwen2BiasesByHand) {
  model::Config q = hand_config();
  q.arch = "qwen2";
  q.qkv_bias = true;
  const Cost a = forward_cost(hand_config(), pass(3, 2)), b = forward_cost(q, pass(3, 2));
  // One add per output of q (8) and k, v (4 each), per token and layer; the
  // f32 bias vectors read once per layer.
  EXPECT_DOUBLE_EQ(b[Op::Q].flops - a[Op::Q].flops, 2 * (3.0 * 8));
  EXPECT_DOUBLE_EQ(b[Op::K].flops - a[Op::K].flops, 2 * (3.0 * 4));
  EXPECT_DOUBLE_EQ(b.total().weight_bytes - a.total().weight_bytes, 2 * (8 + 4 + 4) * 4.0);
  EXPECT_DOUBLE_EQ(param_count(q).total() - param_count(hand_config()).total(), 2 * 16.0);
  EXPECT_DOUBLE_EQ(weight_memory_bytes(q, 1.0) - weight_memory_bytes(hand_config(), 1.0), 2 * 16 * 4.0);
}

// gemma3 on the tiny config with a window of 3 and swa pattern 2: layer 0
// local, layer 1 global.
TEST(PerfCost, Gemma3SlidingWindowAndNormsByHand) {
  model::Config g = hand_config();
  g.arch = "gemma3";
  g.qk_norm = g.post_norms = true;
  g.ffn_act = model::FfnAct::GeluTanh;
  g.swa_window = 3;
  g.swa_pattern = 2;
  const Cost a = forward_cost(hand_config(), pass(3, 2)), b = forward_cost(g, pass(3, 2));
  // New tokens at positions 2, 3, 4: global sees 3 + 4 + 5 = 12 pairs,
  // local min(3, .) each: 9. Per head 2·head_dim FLOPs per pair.
  EXPECT_DOUBLE_EQ(b[Op::Scores].flops, 2.0 * 4 * 2 * (12 + 9));
  EXPECT_DOUBLE_EQ(a[Op::Scores].flops, 2.0 * 4 * 2 * (12 + 12));
  // Rows read: global 5 positions; local from max(0, 2-3+1) = 0: also 5.
  EXPECT_DOUBLE_EQ(b[Op::Scores].kv_bytes, a[Op::Scores].kv_bytes);
  // Decode at position 10 (P = 10, T = 1): local layers read positions 8..10.
  const Cost d = forward_cost(g, pass(1, 10));
  EXPECT_DOUBLE_EQ(d[Op::Scores].kv_bytes, (11 + 3) * 4 * 2.0);
  // Norms: QK-norm (3 tokens x 3 heads x 4) and a post-norm (3 x 8) more
  // per layer in the attention block; one post-norm more in the FFN block.
  EXPECT_DOUBLE_EQ(b[Op::AttnNorm].flops - a[Op::AttnNorm].flops, 2 * 4.0 * (3 * 3 * 4 + 3 * 8));
  EXPECT_DOUBLE_EQ(b[Op::FfnNorm].flops - a[Op::FfnNorm].flops, 2 * 4.0 * (3 * 8));
  EXPECT_DOUBLE_EQ(b[Op::SiluMul].flops, 2 * 9.0 * 3 * 16);
  EXPECT_DOUBLE_EQ(param_count(g).norms - param_count(hand_config()).norms, 2 * (2 * 4.0 + 2 * 8.0));
}

TEST(PerfCost, CausalTriangleIsCountedExactly) {
  // Prefill of T tokens: T(T+1)/2 query-key pairs, not T².
  for (int64_t t : {1, 2, 7, 64}) {
    const Cost c = forward_cost(hand_config(), pass(t, 0));
    EXPECT_DOUBLE_EQ(c[Op::Scores].flops, 2.0 * (2.0 * 4 * 2) * double(t * (t + 1) / 2)) << t;
  }
  // One decode step at position P attends over P + 1 positions.
  EXPECT_DOUBLE_EQ(forward_cost(hand_config(), pass(1, 99))[Op::Scores].flops, 2.0 * (2.0 * 4 * 2) * 100);
}

TEST(PerfCost, LogitsForAllTokensAndBatch) {
  Pass p = pass(5, 0);
  EXPECT_DOUBLE_EQ(forward_cost(hand_config(), p)[Op::LmHead].flops, 2.0 * 8 * 10);
  p.logits_for_all_tokens = true;
  EXPECT_DOUBLE_EQ(forward_cost(hand_config(), p)[Op::LmHead].flops, 5 * 2.0 * 8 * 10);

  // A batch shares the weights and multiplies everything per sequence.
  const Cost one = forward_cost(hand_config(), pass(1, 10, 1));
  const Cost four = forward_cost(hand_config(), pass(1, 10, 4));
  EXPECT_DOUBLE_EQ(four.flops(), 4 * one.flops());
  EXPECT_DOUBLE_EQ(four.total().kv_bytes, 4 * one.total().kv_bytes);
  EXPECT_DOUBLE_EQ(four[Op::Q].weight_bytes, one[Op::Q].weight_bytes);
}

TEST(PerfCost, DecodeIsTwoFlopsPerParameter) {
  // Kaplan et al. 2020: a forward pass costs ~2N FLOPs per token, N the
  // non-embedding parameters (the LM head is a matmul and counts).
  const model::Config c = resolve_model("llama-3.1-8b").config;
  const ParamCount n = param_count(c);
  const double flops = forward_cost(c, Pass{}).flops();
  EXPECT_NEAR(flops / (2.0 * (n.layers + n.lm_head)), 1.0, 0.005);
}

// The tiny config as a mixture of 4 experts of 6, 2 per token.
model::Config hand_moe() {
  model::Config c = hand_config();
  c.n_expert = 4;
  c.n_expert_used = 2;
  c.n_ff_exp = 6;
  return c;
}

TEST(PerfCost, MixtureOfExpertsByHand) {
  const model::Config c = hand_moe();
  // Per layer: q 8 + k 4 + v 4 + o 8 + 2 experts' gate and up 2·2·6 + the
  // router's 4 + down 8 = 60; 2 layers and the LM head's 10: 130.
  EXPECT_DOUBLE_EQ(matmul_rows(c), 130.0);
  // Down's input is a token's 2 experts' 12 hidden units: (8 + 8 + 8 + 12) x 2 + 8.
  EXPECT_DOUBLE_EQ(matmul_inputs(c), 80.0);
  // Each job's FLOPs are still 2·rows·cols per token (the simulator's count).
  const Cost three = forward_cost(c, pass(3, 2));
  for (const MatmulJob& j : matmul_jobs(c)) {
    double flops = 0;
    for (size_t i = 0; i < j.n_ops; ++i) flops += three[j.ops[i]].flops;
    EXPECT_DOUBLE_EQ(flops / (2.0 * j.rows * j.cols), j.ops[0] == Op::LmHead ? 1.0 : 3.0) << op_name(j.ops[0]);
  }
  // 3 tokens run 2 experts of 6 each, and the gate the router's 4 logits.
  EXPECT_DOUBLE_EQ(three[Op::Gate].flops, 2 * (2.0 * 3 * 8 * (12 + 4)));
  EXPECT_DOUBLE_EQ(three[Op::Up].flops, 2 * (2.0 * 3 * 8 * 12));
  EXPECT_DOUBLE_EQ(three[Op::Down].flops, three[Op::Up].flops);
  EXPECT_DOUBLE_EQ(three[Op::SiluMul].flops, 2 * (5.0 * 3 * 12));
  // Weights read: the experts 3 tokens touch, 4·(1 - (1 - 2/4)^3) = 3.5 of
  // 8 x 6 each (1 byte), and the router's 8 x 4; one token reads its 2.
  EXPECT_DOUBLE_EQ(three[Op::Up].weight_bytes, 2 * (3.5 * 8 * 6));
  EXPECT_DOUBLE_EQ(three[Op::Down].weight_bytes, three[Op::Up].weight_bytes);
  EXPECT_DOUBLE_EQ(three[Op::Gate].weight_bytes, 2 * (3.5 * 8 * 6 + 8 * 4));
  EXPECT_DOUBLE_EQ(forward_cost(c, pass(1, 4))[Op::Up].weight_bytes, 2 * (2.0 * 8 * 6));
  // Every layer holds all 4 experts' 3 x 8 x 6 and the router; a token skips 2.
  const ParamCount n = param_count(c), dense = param_count(hand_config());
  EXPECT_DOUBLE_EQ(n.layers - dense.layers, 2 * (4 * 3 * 8 * 6 + 8 * 4 - 3 * 8 * 16.0));
  EXPECT_DOUBLE_EQ(n.total() - n.active(), 2 * (2 * 3 * 8 * 6.0));
  EXPECT_DOUBLE_EQ(weight_memory_bytes(c, 1.0) - weight_memory_bytes(hand_config(), 1.0), n.layers - dense.layers);
  EXPECT_DOUBLE_EQ(dense.active(), dense.total());
}

// A gated shared expert of 5 (qwen2moe) runs for every token: its weights
// are read whatever the routing, and its gate is one more row beside the
// router's 4.
TEST(PerfCost, SharedExpertByHand) {
  model::Config c = hand_moe();
  c.n_ff_shexp = 5;
  c.shared_expert_gated = true;
  const model::Config plain = hand_moe();
  const Cost three = forward_cost(c, pass(3, 2)), before = forward_cost(plain, pass(3, 2));
  EXPECT_DOUBLE_EQ(three[Op::Up].flops - before[Op::Up].flops, 2 * (2.0 * 3 * 8 * 5));
  EXPECT_DOUBLE_EQ(three[Op::Up].weight_bytes - before[Op::Up].weight_bytes, 2 * (8.0 * 5));
  EXPECT_DOUBLE_EQ(three[Op::Gate].flops - before[Op::Gate].flops, 2 * (2.0 * 3 * 8 * (5 + 1)));
  EXPECT_DOUBLE_EQ(param_count(c).layers - param_count(plain).layers, 2 * (3.0 * 8 * 5 + 8));
  EXPECT_DOUBLE_EQ(param_count(c).idle_experts, param_count(plain).idle_experts);  // never skipped
  EXPECT_DOUBLE_EQ(matmul_rows(c) - matmul_rows(plain), 2 * (2.0 * 5 + 1));
}

// olmo2: no norms before attention and the FFN; QK-norm gains over all of
// Q (q_dim) and all of K (kv_dim).
TEST(PerfCost, Olmo2NormsByHand) {
  model::Config c = hand_config();
  c.input_norms = false;
  c.qk_norm = c.qk_norm_whole = true;
  const double L = c.n_layer;
  EXPECT_DOUBLE_EQ(param_count(c).norms, L * (c.q_dim() + c.kv_dim()) + c.n_embd);
  EXPECT_DOUBLE_EQ(forward_cost(c, pass(3, 2))[Op::FfnNorm].flops, 0.0);
}

// Mixtral-8x7B: a decode step reads 2 of each layer's 8 experts, a
// 512-token prefill all of them (1 - 0.75^512 rounds to 1), and its FLOPs
// follow the 2 experts a token runs, not the 8 it could.
TEST(PerfCost, MixtralDecodeReadsTwoExpertsAndPrefillAllEight) {
  const model::Config c = resolve_model("mixtral-8x7b").config;
  const double experts = 32.0 * 8 * 4096 * 14336;  // up's (or down's) weights, 1 byte each in pass()
  EXPECT_DOUBLE_EQ(forward_cost(c, pass(1, 100))[Op::Up].weight_bytes, experts * 2 / 8);
  EXPECT_DOUBLE_EQ(forward_cost(c, pass(512, 0))[Op::Up].weight_bytes, experts);
  // A decode step streams the weights one token runs through: 2 bytes per
  // active parameter (the embedding but for its one row; f32 norm gains).
  const ParamCount n = param_count(c);
  EXPECT_NEAR(forward_cost(c, Pass{}).total().weight_bytes / (2.0 * (n.active() - n.embedding)), 1.0, 1e-4);
  EXPECT_NEAR(forward_cost(c, Pass{}).flops() / (2.0 * (n.active() - n.embedding)), 1.0, 0.005);  // Kaplan
  // Twice the experts to choose from: the same expert FLOPs and only the
  // router's 8 more logits; twice the experts per token: twice the FLOPs.
  const Cost base = forward_cost(c, pass(16, 0));
  model::Config wider = c, deeper = c;
  wider.n_expert = 16;
  deeper.n_expert_used = 4;
  EXPECT_DOUBLE_EQ(forward_cost(wider, pass(16, 0))[Op::Up].flops, base[Op::Up].flops);
  EXPECT_DOUBLE_EQ(forward_cost(wider, pass(16, 0))[Op::Gate].flops - base[Op::Gate].flops, 32 * 2.0 * 16 * 4096 * 8);
  EXPECT_DOUBLE_EQ(forward_cost(deeper, pass(16, 0))[Op::Up].flops, 2 * base[Op::Up].flops);
  EXPECT_DOUBLE_EQ(forward_cost(deeper, pass(16, 0))[Op::Down].flops, 2 * base[Op::Down].flops);
}

TEST(PerfCost, ParameterCountsMatchThePublishedOnes) {
  EXPECT_DOUBLE_EQ(param_count(resolve_model("llama-3.1-8b").config).total(), 8030261248.0);
  EXPECT_DOUBLE_EQ(param_count(resolve_model("llama-2-7b").config).total(), 6738415616.0);
  // Tied embeddings: no separate output matrix.
  const ParamCount smol = param_count(resolve_model("smollm2-135m").config);
  EXPECT_DOUBLE_EQ(smol.lm_head, 0.0);
  EXPECT_NEAR(smol.total() / 1e6, 134.5, 0.5);
  // Q/K/V biases (qwen2) and gemma3's QK and post norms, 256-wide heads:
  // the model cards' exact counts.
  EXPECT_DOUBLE_EQ(param_count(resolve_model("qwen2.5-7b").config).total(), 7615616512.0);
  EXPECT_DOUBLE_EQ(param_count(resolve_model("qwen2.5-0.5b").config).total(), 494032768.0);
  EXPECT_DOUBLE_EQ(param_count(resolve_model("gemma-3-1b").config).total(), 999885952.0);
  // qwen3: QK norms, 128-wide heads (q_dim 2048 against n_embd 1024 in the
  // 0.6B); the model cards' 8.2B / 0.6B, 6.95B / 0.44B without embeddings.
  EXPECT_DOUBLE_EQ(param_count(resolve_model("qwen3-8b").config).total(), 8190735360.0);
  EXPECT_DOUBLE_EQ(param_count(resolve_model("qwen3-0.6b").config).total(), 596049920.0);
  // Mixtures of experts: Mixtral-8x7B's 46.7B, 12.9B per token (Mistral AI's
  // announcement); Qwen3-30B-A3B's 30.5B, 3.3B activated (its model card,
  // rounded down: a token skips 120 experts of 3 x 2048 x 768 in 48 layers).
  const ParamCount mixtral = param_count(resolve_model("mixtral-8x7b").config);
  EXPECT_DOUBLE_EQ(mixtral.total(), 46702792704.0);
  EXPECT_NEAR(mixtral.active() / 12.9e9, 1.0, 0.01);
  const ParamCount qwen = param_count(resolve_model("qwen3-30b-a3b").config);
  EXPECT_NEAR(qwen.total() / 30.5e9, 1.0, 0.01);
  EXPECT_DOUBLE_EQ(qwen.total() - qwen.active(), 48.0 * 120 * 3 * 2048 * 768);
  EXPECT_NEAR(qwen.active() / 3.35e9, 1.0, 0.01);
}

// Gemma 3 1B at decode position 8191: its 4 global layers (5, 11, 17, 23)
// read all 8192 cached positions, its 22 local ones the last 512.
TEST(PerfCost, Gemma3DecodeReadsOnlyTheWindowInLocalLayers) {
  const model::Config g = resolve_model("gemma-3-1b").config;
  Pass p;
  p.new_tokens = 1;
  p.past = 8191;
  p.kv_bytes = 2.0;
  const double kvd = 256;  // 1 KV head of 256
  EXPECT_DOUBLE_EQ(forward_cost(g, p)[Op::Scores].kv_bytes, (4 * 8192.0 + 22 * 512.0) * kvd * 2.0);
}

TEST(PerfCost, KvBytesPerTokenGqaAgainstMha) {
  // Llama-3.1-8B: GQA, 8 KV heads of 128: 2 · 32 layers · 1024 · 2 bytes.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(resolve_model("llama-3.1-8b").config, 2.0), 131072.0);
  // Llama-2-7B: MHA, 32 KV heads of 128: four times as much.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(resolve_model("llama-2-7b").config, 2.0), 524288.0);
  // Tiny: 2 · 2 layers · 4 · 2 bytes.
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(hand_config(), 2.0), 32.0);
  // A whole cache: every layer keeps every position, unless it is a
  // sliding-window layer, which keeps the last swa_window of them.
  EXPECT_DOUBLE_EQ(kv_cache_bytes(hand_config(), 2.0, 10), 320.0);
  model::Config g = hand_config();
  g.swa_window = 3;
  g.swa_pattern = 2;  // layer 0 local, layer 1 global
  EXPECT_DOUBLE_EQ(kv_cache_bytes(g, 2.0, 10), 2 * 4 * 2.0 * (3 + 10));
  EXPECT_DOUBLE_EQ(kv_cache_bytes(g, 2.0, 2), 2 * 4 * 2.0 * (2 + 2));
  // gemma-3-1b at 32768 positions: 4 global layers keep them all, 22 local
  // ones 512 each (1 KV head of 256, bf16).
  EXPECT_DOUBLE_EQ(kv_cache_bytes(resolve_model("gemma-3-1b").config, 2.0, 32768),
                   2 * 256 * 2.0 * (4 * 32768.0 + 22 * 512.0));
}

TEST(PerfCost, OpNamesAreDistinct) {
  for (size_t i = 0; i < kOpCount; ++i)
    for (size_t j = i + 1; j < kOpCount; ++j) EXPECT_NE(op_name(Op(i)), op_name(Op(j)));
}

}  // namespace
}  // namespace kvlab::perf
