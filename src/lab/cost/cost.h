// FLOPs and bytes of every op of one forward pass of a llama-family decoder.
// The engine's Trace and the simulator both call forward_cost(), so measured
// and predicted numbers are computed from the same formulas.
//
// Conventions (docs/perf-model.md has the derivations and citations):
//  - A multiply-add is 2 FLOPs; a matmul [M x K]·[K x N] costs 2·M·K·N.
//  - Every other elementwise arithmetic op, and exp, counts 1 FLOP per element;
//    per-row scalar work (1/sum, mean, rsqrt) is O(rows) and ignored.
//  - Weights are read once per pass whatever the number of tokens and
//    sequences in it: that is the whole point of batching. A mixture of
//    experts reads only the experts its tokens are routed to (the expected
//    number under uniform routing: cost.cpp), and its router's matrix,
//    whose matmul is counted with the gate's (Op::Gate).
//  - KV: each sequence's K and V for all P+T positions are read once per layer,
//    and the T new positions are written once.
//  - Activations: each op reads its inputs and writes its outputs once
//    (unfused; attention scores materialised). They are kept separate from
//    weight and KV bytes because fused engines keep most of them on chip.
//
// Depends on nothing but model/config.h and the standard library, and does no
// allocation, so the engine can call it for every step it traces.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "model/config.h"

namespace kvlab::perf {

// The shape of one forward pass: B sequences, each feeding T new tokens after
// P positions already cached. Prefill: T = prompt, P = 0. Decode with cache:
// T = 1, P = position. Decode without cache at position p: T = p + 1, P = 0.
struct Pass {
  int64_t new_tokens = 1;     // T, per sequence
  int64_t past = 0;           // P, per sequence
  int64_t batch = 1;          // B
  double weight_bytes = 2.0;  // bytes per weight of the matrices (bits / 8)
  double kv_bytes = 2.0;      // bytes per cached K or V element
  double act_bytes = 4.0;     // bytes per activation element (the engine keeps f32)
  // Logits for every new token (perplexity) instead of only the last one of
  // each sequence (generation: what the engine computes in prefill).
  bool logits_for_all_tokens = false;
};

// Ops in the order the forward pass runs them. Per-layer ops are summed over
// all layers.
enum class Op : uint8_t {
  Embedding,  // row lookup in token_embd
  AttnNorm,   // RMSNorm before attention
  Q,
  K,
  V,        // projections (K and V also write the cache)
  Rope,     // rotary embedding of Q and K
  Scores,   // Q·K^T over the causal window (reads K cache)
  Softmax,  // scale, max, exp, sum, normalise
  AttnV,    // probabilities · V (reads V cache)
  O,        // output projection
  FfnNorm,  // RMSNorm before the MLP
  Gate,
  Up,          // SwiGLU input projections
  SiluMul,     // silu(gate) * up (gelu for gemma3)
  Down,        // SwiGLU output projection
  Residual,    // the two residual adds
  OutputNorm,  // final RMSNorm (logit rows only)
  LmHead,      // logits
  Count
};
inline constexpr size_t kOpCount = size_t(Op::Count);
std::string_view op_name(Op op);

struct OpCost {
  double flops = 0;
  double weight_bytes = 0;
  double kv_bytes = 0;  // cache reads + writes
  double act_bytes = 0;
  double bytes() const { return weight_bytes + kv_bytes + act_bytes; }
};

struct Cost {
  std::array<OpCost, kOpCount> ops{};

  const OpCost& operator[](Op op) const { return ops[size_t(op)]; }
  OpCost total() const;
  // DRAM traffic a roofline should charge: weights + KV. Activations are
  // assumed to stay in caches (see the header comment); total().bytes() has them.
  double dram_bytes() const;
  double flops() const { return total().flops; }
};

Cost forward_cost(const model::Config& c, const Pass& p);

// Parameters of the model by role (element counts, not bytes).
struct ParamCount {
  double embedding = 0;  // token_embd
  double layers = 0;     // attention + MLP matrices of all layers (every expert and the router in a MoE)
  double lm_head = 0;    // output.weight; 0 when tied to token_embd
  double norms = 0;      // RMSNorm gains (stored f32 in GGUF)
  double biases = 0;     // Q/K/V projection biases (qwen2; f32 in GGUF)
  double idle_experts = 0;  // of `layers`: the n_expert - n_expert_used experts a token skips; 0 when dense
  double total() const { return embedding + layers + lm_head + norms + biases; }
  double matrices() const { return embedding + layers + lm_head; }
  double active() const { return total() - idle_experts; }  // what one token runs through
};
ParamCount param_count(const model::Config& c);

// The FFN hidden units one token runs through: n_ff, or in a mixture of
// experts its n_expert_used experts' n_ff_exp each and the shared expert's.
double ffn_hidden_per_token(const model::Config& c);

// The matmul jobs of a pass as the engine runs them, each paying a fixed
// start and tail (Efficiency::call_s): one per group of matrices that share
// an input (model/model.cpp: Q, K and V; O; gate and up; down) in every
// layer, then the LM head. `rows` is the weight rows (output features) the
// job multiplies by: a one-token matmul computes one dot product, and pays
// one row's fixed cost, per row. `calls` counts its jobs over all layers,
// `cols` is the input features of one of them. In a mixture of experts the
// rows and columns are one token's (ffn_hidden_per_token; the router's
// n_expert rows with gate and up), so that FLOPs / (2·rows·cols) is still
// the tokens; its experts' jobs count as one group per layer.
struct MatmulJob {
  std::array<Op, 3> ops;
  size_t n_ops;
  double rows, calls, cols;
};
std::array<MatmulJob, 5> matmul_jobs(const model::Config& c);
// Their sums: L·(q + 2·kv + d + 2·f + E + d) + V rows, 4·L + 1 calls,
// f = ffn_hidden_per_token, E = n_expert (0 when dense).
double matmul_rows(const model::Config& c);
double matmul_calls(const model::Config& c);
// Their input columns, converted once per call: L·(d + q + d + f) + d.
double matmul_inputs(const model::Config& c);

// Bytes the weights occupy in memory: matrices at `weight_bytes` each, norm
// gains at 4 bytes.
double weight_memory_bytes(const model::Config& c, double weight_bytes);

// KV cache bytes per position of one sequence: 2 (K and V) · layers · kv_dim.
double kv_bytes_per_token(const model::Config& c, double kv_bytes);
// KV cache bytes one sequence of `positions` holds: every position in a
// global layer, the last swa_window in a sliding-window layer (gemma3's
// local layers, which never read further back; llama.cpp and kvlab trim
// them, kvlab to a ring of window + batch: kv/cache.h).
double kv_cache_bytes(const model::Config& c, double kv_bytes, double positions);

// Positions per chunk when the engine splits a (token, KV head) attention
// task (kernels::kAttnChunk, kernels/attention.h). A copy, so that the cost
// model depends on the model's configuration alone; perf_simulate_test
// checks that the two agree.
inline constexpr int kAttnChunk = 256;

}  // namespace kvlab::perf
