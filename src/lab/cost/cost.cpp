#include "lab/cost/cost.h"

#include <algorithm>
#include <cmath>

namespace kvlab::perf {

namespace {

constexpr double kNormGainBytes = 4.0;  // RMSNorm gains are F32 in GGUF files
constexpr double kBiasBytes = 4.0;      // so are projection biases

// Softmax per score: scale, running max, subtract max, exp, add to sum,
// multiply by 1/sum.
constexpr double kSoftmaxFlops = 6.0;
// RMSNorm per element: square and accumulate (2), normalise (1), gain (1).
constexpr double kNormFlops = 4.0;
// SiLU(g)·u per element: negate, exp, add 1, divide, multiply by u.
constexpr double kSiluMulFlops = 5.0;
// GELU(g)·u with the tanh form: x², ·0.044715, +1, ·x, ·√(2/π), tanh, +1,
// ·0.5x, ·u (tanh counted as one).
constexpr double kGeluMulFlops = 9.0;
// RoPE per rotated dimension: a pair (x0, x1) becomes (x0·c − x1·s, x0·s + x1·c),
// 4 multiplies + 2 adds for 2 dimensions.
constexpr double kRopeFlopsPerDim = 3.0;

// A matmul of `rows` activations by a [in x out] weight matrix.
OpCost matmul(double rows, double in, double out, const Pass& p) {
  return {2.0 * rows * in * out, in * out * p.weight_bytes, 0.0, rows * (in + out) * p.act_bytes};
}

// The same followed by a bias add (qwen2's Q, K and V): one add per output,
// and the f32 bias vector read.
OpCost matmul_bias(double rows, double in, double out, bool bias, const Pass& p) {
  OpCost m = matmul(rows, in, out, p);
  if (bias) {
    m.flops += rows * out;
    m.weight_bytes += out * kBiasBytes;
  }
  return m;
}

// A matmul that reads `weights` elements rather than in·out: a mixture of
// experts' FFN reads only the experts its tokens were routed to.
OpCost matmul_reading(double rows, double in, double out, double weights, const Pass& p) {
  OpCost m = matmul(rows, in, out, p);
  m.weight_bytes = weights * p.weight_bytes;
  return m;
}

// The experts of one layer a pass of `tokens` tokens reads, expected under
// uniform, independent routing: a token's k picks of n miss a given expert
// with probability 1 - k/n, all the tokens with (1 - k/n)^tokens, so
// E = n·(1 - (1 - k/n)^tokens): k for one token, n for many. Real routers
// are skewed, which only lowers E (it is concave in each expert's share).
double experts_read(const model::Config& c, double tokens) {
  const double n = c.n_expert, k = c.n_expert_used;
  return std::min(n, n * (1.0 - std::pow(1.0 - k / n, tokens)));
}

// The rows a MoE layer's routing multiplies by: the router's, and the
// shared expert's sigmoid gate where it has one; 0 when dense.
double router_rows(const model::Config& c) { return c.n_expert + (c.shared_expert_gated ? 1.0 : 0.0); }

OpCost rmsnorm(double rows, double width, const Pass& p) {
  return {kNormFlops * rows * width, width * kNormGainBytes, 0.0, 2.0 * rows * width * p.act_bytes};
}

OpCost times(OpCost c, double n) { return {c.flops * n, c.weight_bytes * n, c.kv_bytes * n, c.act_bytes * n}; }
OpCost plus(OpCost x, OpCost y) {
  return {x.flops + y.flops, x.weight_bytes + y.weight_bytes, x.kv_bytes + y.kv_bytes, x.act_bytes + y.act_bytes};
}

}  // namespace

std::string_view op_name(Op op) {
  switch (op) {
    case Op::Embedding:
      return "embedding";
    case Op::AttnNorm:
      return "attn_norm";
    case Op::Q:
      return "q_proj";
    case Op::K:
      return "k_proj";
    case Op::V:
      return "v_proj";
    case Op::Rope:
      return "rope";
    case Op::Scores:
      return "attn_scores";
    case Op::Softmax:
      return "softmax";
    case Op::AttnV:
      return "attn_v";
    case Op::O:
      return "o_proj";
    case Op::FfnNorm:
      return "ffn_norm";
    case Op::Gate:
      return "ffn_gate";
    case Op::Up:
      return "ffn_up";
    case Op::SiluMul:
      return "silu_mul";
    case Op::Down:
      return "ffn_down";
    case Op::Residual:
      return "residual";
    case Op::OutputNorm:
      return "output_norm";
    case Op::LmHead:
      return "lm_head";
    case Op::Count:
      break;
  }
  return "?";
}

OpCost Cost::total() const {
  OpCost t;
  for (const OpCost& o : ops) {
    t.flops += o.flops;
    t.weight_bytes += o.weight_bytes;
    t.kv_bytes += o.kv_bytes;
    t.act_bytes += o.act_bytes;
  }
  return t;
}

double Cost::dram_bytes() const {
  const OpCost t = total();
  return t.weight_bytes + t.kv_bytes;
}

Cost forward_cost(const model::Config& c, const Pass& p) {
  const double L = c.n_layer, d = c.n_embd, hd = c.head_dim;
  const double nh = c.n_head, nkv = c.n_head_kv, qd = c.q_dim(), kvd = c.kv_dim();
  const double rope_dim = c.rope_dim > 0 ? c.rope_dim : c.head_dim;
  const double T = double(p.new_tokens), P = double(p.past), B = double(p.batch);

  const double rows = T * B;  // tokens through the layers
  // Query-key pairs, causal: new token i (0-based) at position P+i sees P+i+1
  // positions, so one sequence has T·P + T(T+1)/2 pairs.
  const double pairs = B * (T * P + T * (T + 1.0) / 2.0);
  const double ctx = B * (P + T);  // cached positions read, all sequences
  // Local (sliding-window) layers, gemma3: position q sees min(q+1, W)
  // positions, and the pass reads the rows from max(0, P-W+1) on.
  double local_layers = 0, pairs_local = 0, ctx_local = 0;
  if (c.swa_window > 0) {
    for (int i = 0; i < c.n_layer; ++i) local_layers += c.is_swa(i) ? 1.0 : 0.0;
    const double W = c.swa_window;
    for (double q = P; q < P + T; ++q) pairs_local += std::min(q + 1.0, W);
    pairs_local *= B;
    ctx_local = B * (P + T - std::max(0.0, P - W + 1.0));
  }
  const double global_layers = L - local_layers;
  const double logit_rows = p.logits_for_all_tokens ? rows : B;
  const double a = p.act_bytes;

  Cost cost;
  auto set = [&](Op op, OpCost v) { cost.ops[size_t(op)] = v; };

  // Distinct rows read from token_embd cannot exceed the vocabulary.
  set(Op::Embedding, {0.0, std::min(rows, double(c.n_vocab)) * d * p.weight_bytes, 0.0, rows * d * a});

  // gemma3's extra norms are counted with the block's own: QK-norm of every
  // Q and K head and the attention post-norm with AttnNorm, the FFN post-norm
  // with FfnNorm.
  // olmo2 has no input norms; its (and olmoe's) QK-norm spans all of Q and K.
  OpCost attn_norm = c.input_norms ? rmsnorm(rows, d, p) : OpCost{}, ffn_norm = attn_norm;
  if (c.qk_norm && c.qk_norm_whole) attn_norm = plus(attn_norm, plus(rmsnorm(rows, qd, p), rmsnorm(rows, kvd, p)));
  else if (c.qk_norm) attn_norm = plus(attn_norm, rmsnorm(rows * (nh + nkv), hd, p));
  if (c.post_norms) attn_norm = plus(attn_norm, rmsnorm(rows, d, p)), ffn_norm = plus(ffn_norm, rmsnorm(rows, d, p));
  set(Op::AttnNorm, times(attn_norm, L));
  set(Op::Q, times(matmul_bias(rows, d, qd, c.qkv_bias, p), L));
  OpCost k = matmul_bias(rows, d, kvd, c.qkv_bias, p), v = k;
  k.kv_bytes = v.kv_bytes = rows * kvd * p.kv_bytes;  // the new positions written
  set(Op::K, times(k, L));
  set(Op::V, times(v, L));
  set(Op::Rope, times({kRopeFlopsPerDim * rope_dim * (nh + nkv) * rows, 0.0, 0.0, 2.0 * rows * (qd + kvd) * a}, L));

  // Scores read Q and the K cache and write one score per pair and head;
  // softmax reads and writes them; AV reads them and the V cache.
  auto attention = [&](double n_pairs, double n_ctx, double layers) {
    set(Op::Scores, plus(cost[Op::Scores], times({2.0 * hd * nh * n_pairs, 0.0, n_ctx * kvd * p.kv_bytes,
                                                   (rows * qd + nh * n_pairs) * a},
                                                  layers)));
    set(Op::Softmax, plus(cost[Op::Softmax], times({kSoftmaxFlops * nh * n_pairs, 0.0, 0.0, 2.0 * nh * n_pairs * a},
                                                    layers)));
    set(Op::AttnV, plus(cost[Op::AttnV], times({2.0 * hd * nh * n_pairs, 0.0, n_ctx * kvd * p.kv_bytes,
                                                 (nh * n_pairs + rows * qd) * a},
                                                layers)));
  };
  attention(pairs, ctx, global_layers);
  if (local_layers > 0) attention(pairs_local, ctx_local, local_layers);

  set(Op::O, times(matmul(rows, qd, d, p), L));
  set(Op::FfnNorm, times(ffn_norm, L));
  // Each token runs `ff` hidden units (k experts' in a MoE); the pass reads
  // the weights of `ff_read` (all of a dense FFN, the experts it touches).
  // The router's logits are counted with the gate, which shares its input;
  // its softmax and top-k, and the weighted sum of the k experts' outputs
  // (2·k·d per token, 2e-5 of Mixtral's expert FLOPs), are left out.
  // A shared expert runs for every token, as a dense FFN does; its sigmoid
  // gate's one row per token counts with the router's.
  const double ff = ffn_hidden_per_token(c);
  const double ff_read = c.is_moe() ? experts_read(c, rows) * c.n_ff_exp + c.n_ff_shexp : ff;
  OpCost gate = matmul_reading(rows, d, ff, d * ff_read, p);
  if (c.is_moe()) gate = plus(gate, matmul(rows, d, router_rows(c), p));
  set(Op::Gate, times(gate, L));
  set(Op::Up, times(matmul_reading(rows, d, ff, d * ff_read, p), L));
  const double act_flops = c.ffn_act == model::FfnAct::GeluTanh ? kGeluMulFlops : kSiluMulFlops;
  set(Op::SiluMul, times({act_flops * rows * ff, 0.0, 0.0, 3.0 * rows * ff * a}, L));
  set(Op::Down, times(matmul_reading(rows, ff, d, ff_read * d, p), L));
  // Two adds per layer, each reading two vectors and writing one.
  set(Op::Residual, times({2.0 * rows * d, 0.0, 0.0, 6.0 * rows * d * a}, L));

  set(Op::OutputNorm, rmsnorm(logit_rows, d, p));
  set(Op::LmHead, matmul(logit_rows, d, c.n_vocab, p));
  return cost;
}

ParamCount param_count(const model::Config& c) {
  const double d = c.n_embd, qd = c.q_dim(), kvd = c.kv_dim();
  // A layer's gate, up and down: one FFN of n_ff, or n_expert of n_ff_exp
  // and the router (n_expert x d).
  // A shared expert (n_ff_shexp) and its gate (one row) where there is one.
  const double expert = 3.0 * d * c.n_ff_exp;
  const double shared = 3.0 * d * c.n_ff_shexp + (c.shared_expert_gated ? d : 0.0);
  const double ffn = c.is_moe() ? c.n_expert * expert + d * c.n_expert + shared : 3.0 * d * c.n_ff;
  ParamCount n;
  n.embedding = double(c.n_vocab) * d;
  n.lm_head = c.tied_embeddings ? 0.0 : double(c.n_vocab) * d;
  n.layers = double(c.n_layer) * (d * qd + 2.0 * d * kvd + qd * d + ffn);
  n.idle_experts = double(c.n_layer) * double(c.n_expert - c.n_expert_used) * expert;
  n.norms = (c.input_norms ? double(c.n_layer) * 2.0 * d : 0.0) + d;
  n.biases = c.qkv_bias ? double(c.n_layer) * (qd + 2.0 * kvd) : 0.0;
  if (c.qk_norm) n.norms += double(c.n_layer) * (c.qk_norm_whole ? qd + kvd : 2.0 * double(c.head_dim));
  if (c.post_norms) n.norms += double(c.n_layer) * 2.0 * d;
  return n;
}

double ffn_hidden_per_token(const model::Config& c) {
  return c.is_moe() ? double(c.n_expert_used) * c.n_ff_exp + c.n_ff_shexp : double(c.n_ff);
}

std::array<MatmulJob, 5> matmul_jobs(const model::Config& c) {
  const double L = c.n_layer, d = c.n_embd, ff = ffn_hidden_per_token(c), qd = c.q_dim(), kvd = c.kv_dim();
  return {{{{Op::Q, Op::K, Op::V}, 3, L * (qd + 2.0 * kvd), L, d},
           {{Op::O}, 1, L * d, L, qd},
           {{Op::Gate, Op::Up}, 2, L * (2.0 * ff + router_rows(c)), L, d},
           {{Op::Down}, 1, L * d, L, ff},
           {{Op::LmHead}, 1, double(c.n_vocab), 1.0, d}}};
}

namespace {
template <class F>
double sum_over_jobs(const model::Config& c, const F& f) {
  double sum = 0;
  for (const MatmulJob& j : matmul_jobs(c)) sum += f(j);
  return sum;
}
}  // namespace

double matmul_rows(const model::Config& c) {
  return sum_over_jobs(c, [](const MatmulJob& j) { return j.rows; });
}
double matmul_calls(const model::Config& c) {
  return sum_over_jobs(c, [](const MatmulJob& j) { return j.calls; });
}
double matmul_inputs(const model::Config& c) {
  return sum_over_jobs(c, [](const MatmulJob& j) { return j.calls * j.cols; });
}

double weight_memory_bytes(const model::Config& c, double weight_bytes) {
  const ParamCount n = param_count(c);
  return n.matrices() * weight_bytes + n.norms * kNormGainBytes + n.biases * kBiasBytes;
}

double kv_cache_bytes(const model::Config& c, double kv_bytes, double positions) {
  double layer_positions = 0;  // summed over layers
  for (int i = 0; i < c.n_layer; ++i)
    layer_positions += c.is_swa(i) ? std::min(positions, double(c.swa_window)) : positions;
  return 2.0 * double(c.kv_dim()) * kv_bytes * layer_positions;
}

double kv_bytes_per_token(const model::Config& c, double kv_bytes) {
  return 2.0 * double(c.n_layer) * double(c.kv_dim()) * kv_bytes;
}

}  // namespace kvlab::perf
