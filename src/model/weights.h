// Typed views of the model's tensors, bound once at load time. Matrices point
// into the GGUF's bytes (mapped, or the resident copy); small 1-D norm weights
// are widened to f32 into owned vectors (n_embd floats each) so every kernel
// sees f32.
#pragma once
#include <vector>

#include "gguf/file.h"
#include "kernels/matmul.h"
#include "model/config.h"

namespace kvlab::model {

using kernels::WeightMatrix;

// One expert of a mixture-of-experts layer: a gated FFN of n_ff_exp, a
// slice of the layer's 3-D blk.N.ffn_{gate,up,down}_exps tensors.
struct ExpertWeights {
  WeightMatrix gate;  // (n_ff_exp x n_embd)
  WeightMatrix up;    // (n_ff_exp x n_embd)
  WeightMatrix down;  // (n_embd x n_ff_exp)
};

struct LayerWeights {
  std::vector<float> attn_norm;  // (n_embd)  empty unless Config::input_norms, as ffn_norm
  WeightMatrix wq;               // (q_dim  x n_embd)   blk.N.attn_q
  WeightMatrix wk;               // (kv_dim x n_embd)   blk.N.attn_k
  WeightMatrix wv;               // (kv_dim x n_embd)   blk.N.attn_v
  // Projection biases, empty unless Config::qkv_bias:
  std::vector<float> bq;         // (q_dim)             blk.N.attn_q.bias
  std::vector<float> bk, bv;     // (kv_dim)            blk.N.attn_k.bias, attn_v.bias
  // gemma3 (Config::qk_norm, Config::post_norms), else empty:
  std::vector<float> q_norm, k_norm;    // (head_dim; qk_norm_whole: q_dim, kv_dim)  blk.N.attn_q_norm, attn_k_norm
  std::vector<float> attn_post_norm;    // (n_embd)    blk.N.post_attention_norm
  std::vector<float> ffn_post_norm;     // (n_embd)    blk.N.post_ffw_norm
  WeightMatrix wo;               // (n_embd x q_dim)    blk.N.attn_output
  std::vector<float> ffn_norm;   // (n_embd)
  WeightMatrix w_gate;           // (n_ff x n_embd)     blk.N.ffn_gate
  WeightMatrix w_up;             // (n_ff x n_embd)     blk.N.ffn_up
  WeightMatrix w_down;           // (n_embd x n_ff)     blk.N.ffn_down
  // Config::is_moe() in place of the three above:
  WeightMatrix router;               // (n_expert x n_embd) blk.N.ffn_gate_inp
  std::vector<ExpertWeights> experts;  // (n_expert)
  ExpertWeights shared;                // Config::n_ff_shexp > 0: blk.N.ffn_{gate,up,down}_shexp
  std::vector<float> shared_gate;      // (n_embd) shared_expert_gated: blk.N.ffn_gate_inp_shexp

  // Bytes a one-token pass reads for the FFN's gate and up projections
  // (with the router and `experts_per_token` experts' in a MoE) and for its
  // down projection.
  size_t gate_up_bytes(int experts_per_token) const;
  size_t down_bytes(int experts_per_token) const;
};

struct Weights {
  WeightMatrix token_embd;         // (n_vocab x n_embd)  token_embd
  std::vector<float> output_norm;  // (n_embd)
  WeightMatrix output;             // (n_vocab x n_embd)  output, or token_embd when tied
  // (rope_dim / 2) per-pair RoPE divisors (kernels::RopeScaling), each empty
  // when the file has none: rope_freqs (Llama 3.1+), rope_factors_long and
  // rope_factors_short (Phi-3's LongRoPE).
  std::vector<float> rope_freqs, rope_long, rope_short;
  std::vector<LayerWeights> layers;
  int experts_per_token = 0;  // Config::n_expert_used

  // Bytes of matrix data a one-token forward pass reads (embedding rows
  // excluded: a lookup touches n_tokens rows, not the table; of a MoE layer's
  // experts, the n_expert_used a token runs). Norm and bias vectors included.
  size_t matmul_bytes() const;

  // The divisors a context of n_ctx positions per sequence rotates with:
  // rope_freqs; else the long factors when n_ctx exceeds the original
  // context, the short ones otherwise (llama.cpp's choice); nullptr: none.
  const float* rope_divisors(int n_ctx, const Config& c) const;
};

// Checks every required tensor's presence, shape and dtype against `cfg`.
// Throws kvlab::Error("<path>: missing required tensor 'blk.3.attn_q.weight'").
Weights bind_weights(const gguf::File& file, const Config& cfg);

// Re-lays out every matrix the active kernels read faster in groups of 8 rows
// (kernels/rows8.h), in place in a Resident file's copy. A mapped file is
// left as it is: its pages belong to the page cache.
void relayout_for_kernels(Weights& w, gguf::File& file);

}  // namespace kvlab::model
