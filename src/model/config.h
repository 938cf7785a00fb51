// Model hyper-parameters, read once from GGUF metadata (see model/config.cpp).
// Shared by the forward pass, the KV cache and perf::Cost, so that measured and
// predicted FLOPs/bytes come from the same numbers.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

namespace kvlab::model {

// How RoPE pairs the dimensions of a head.
//  Normal: (x[2i], x[2i+1]) rotate together (llama; GGUF permutes Q/K at conversion).
//  NeoX:   (x[i], x[i + d/2]) rotate together (qwen2, gemma, gpt-neox).
enum class RopeOrder { Normal, NeoX };

// The gated FFN's activation: down · (act(gate · x) * (up · x)).
//  SiLU:     x·σ(x)                                    (SwiGLU; llama, qwen2)
//  GeluTanh: 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))) (GeGLU; gemma)
enum class FfnAct { SiLU, GeluTanh };

struct Config {
  std::string arch;            // general.architecture, e.g. "llama"
  std::string name;            // general.name (informational)
  int n_layer = 0;             // {arch}.block_count
  int n_embd = 0;              // {arch}.embedding_length      (d_model)
  int n_ff = 0;                // {arch}.feed_forward_length   (SwiGLU hidden size)
  int n_head = 0;              // {arch}.attention.head_count
  int n_head_kv = 0;           // {arch}.attention.head_count_kv (GQA; == n_head for MHA)
  int head_dim = 0;            // {arch}.attention.key_length, else n_embd / n_head
  int n_vocab = 0;             // rows of token_embd
  int n_ctx_train = 0;         // {arch}.context_length
  int rope_dim = 0;            // {arch}.rope.dimension_count (<= head_dim)
  float rope_theta = 10000.f;  // {arch}.rope.freq_base
  RopeOrder rope_order = RopeOrder::Normal;
  float rms_eps = 1e-5f;       // {arch}.attention.layer_norm_rms_epsilon
  bool tied_embeddings = false;  // no output.weight: logits use token_embd
  bool qkv_bias = false;       // blk.N.attn_{q,k,v}.bias are added after the projections (qwen2)
  int no_rope_step = 0;        // > 0: layers no_rope_step-1, 2·no_rope_step-1, ... rotate neither Q
                               // nor K (smollm3's NoPE layers: 4)
  bool fused_gate_up = false;  // blk.N.ffn_up holds the gate's n_ff rows, then the up rows (phi3)

  // gemma2 and gemma3 (Gemma Team 2024, 2025); all off for llama and qwen2.
  bool qk_norm = false;           // RMSNorm of each Q and K head before RoPE (blk.N.attn_{q,k}_norm)
  bool qk_norm_whole = false;     // with qk_norm: over all of Q (q_dim) and all of K (kv_dim) at
                                  // once, not head by head (olmo2, olmoe)
  bool input_norms = true;        // RMSNorm before attention and the FFN (olmo2 has post_norms only)
  bool post_norms = false;        // RMSNorm of the attention and FFN outputs before each residual
                                  // add (blk.N.post_attention_norm, blk.N.post_ffw_norm)
  bool scale_embeddings = false;  // token embeddings times sqrt(n_embd)
  FfnAct ffn_act = FfnAct::SiLU;
  int swa_window = 0;             // {arch}.attention.sliding_window: a local layer's query at
                                  // position p sees p-swa_window+1 .. p; 0: no local layers
  int swa_pattern = 0;            // every swa_pattern-th layer is global, the others local
  float rope_theta_swa = 10000.f;  // local layers' RoPE base
  float rope_freq_scale = 1.f;     // global layers' positions are multiplied by this
                                   // (1 / {arch}.rope.scaling.factor: linear scaling, YaRN's
                                   // interpolated pairs)
  float rope_attn_factor = 1.f;    // every RoPE cos and sin times this (kernels::RopeScaling):
                                   // {arch}.rope.scaling.attn_factor, for YaRN with llama.cpp's
                                   // magnitude terms (config.cpp)
  int rope_orig_ctx = 0;           // {arch}.rope.scaling.original_context_length, else
                                   // context_length: longer contexts take LongRoPE's long factors
  // rope.scaling.type "yarn": the global layers' pairs from rope_yarn_ramp[0]
  // to [1] blend from their own angles to the scaled ones (kernels::RopeScaling).
  bool rope_yarn = false;
  float rope_yarn_ramp[2] = {0.f, 0.f};
  float final_logit_softcap = 0.f;  // {arch}.final_logit_softcapping: logits = c·tanh(logits/c)
  // granite's scalars, 0 where unused: embeddings times embedding_scale, each
  // block's output times residual_scale before the residual add, q·k times
  // attention_scale instead of attn_scale()'s rule, logits / logit_scale.
  float embedding_scale = 0.f, residual_scale = 0.f, attention_scale = 0.f, logit_scale = 0.f;
  float attn_softcap = 0.f;  // {arch}.attn_logit_softcapping: scores = c·tanh(scores/c) (gemma2)
  float attn_temp_scale = 0.f;  // mistral3: {arch}.attention.temperature_scale (attn_temperature)
  // Mixture of experts (Mixtral as llama, qwen3moe): each token's FFN is the
  // sum of n_expert_used of the layer's n_expert FFNs, picked by the top
  // probabilities of a softmax over the router's logits (blk.N.ffn_gate_inp)
  // and weighted by those probabilities. 0 experts: one dense FFN of n_ff.
  int n_expert = 0;                  // {arch}.expert_count
  int n_expert_used = 0;             // {arch}.expert_used_count (top-k)
  int n_ff_exp = 0;                  // each expert's hidden size: {arch}.expert_feed_forward_length
  bool expert_weights_norm = false;  // the k picked probabilities are divided by their sum
  // A shared expert (qwen2moe, granitemoe): a dense FFN of n_ff_shexp every
  // token runs beside its picks, its output added to theirs; with
  // shared_expert_gated, times sigmoid(w · x) first (blk.N.ffn_gate_inp_shexp).
  int n_ff_shexp = 0;                // {arch}.expert_shared_feed_forward_length; 0: none
  bool shared_expert_gated = false;

  bool is_moe() const { return n_expert > 0; }
  // The hidden size of the FFN a token runs through (an expert's, in a MoE).
  int ffn_width() const { return is_moe() ? n_ff_exp : n_ff; }
  // The widest FFN a pass runs (the activation buffers' width).
  int max_ffn_width() const { return std::max(ffn_width(), n_ff_shexp); }

  int q_dim() const { return n_head * head_dim; }
  int kv_dim() const { return n_head_kv * head_dim; }
  int gqa_group() const { return n_head / n_head_kv; }
  // q·k is multiplied by this: 1/sqrt(head_dim), except for Gemma 2 27B
  // (46 layers) and Gemma 3 27B (62), trained with 1/sqrt(n_embd / n_head)
  // (gemma_pytorch's query_pre_attn_scalar, as llama.cpp applies it);
  // granite's attention.scale where the file gives one.
  float attn_scale() const {
    if (attention_scale != 0.f) return attention_scale;
    const bool by_width = (arch == "gemma2" && n_layer == 46) || (arch == "gemma3" && n_layer == 62);
    return 1.0f / std::sqrt(float(by_width ? n_embd / n_head : head_dim));
  }
  // Llama 4's attention temperature (mistral3), which llama.cpp computes in
  // double: queries at `pos` times log(floor(pos / n_orig) + 1) * scale + 1.
  float attn_temperature(int pos) const {
    const double steps = std::floor(float(pos) / float(rope_orig_ctx));
    return float(std::log(steps + 1.0) * double(attn_temp_scale) + 1.0);
  }
  bool uses_rope(int layer) const { return no_rope_step == 0 || (layer + 1) % no_rope_step != 0; }
  // A local (sliding-window) layer: all but every swa_pattern-th one.
  bool is_swa(int layer) const {
    return swa_window > 0 && swa_pattern > 0 && layer % swa_pattern < swa_pattern - 1;
  }
  // The first position a query at `pos` attends to in `layer`.
  int first_visible(int layer, int pos) const { return is_swa(layer) && pos >= swa_window ? pos - swa_window + 1 : 0; }
};

}  // namespace kvlab::model

namespace kvlab::gguf { class File; }

namespace kvlab::model {

// Sets what an architecture fixes (RoPE order, biases, the gemmas' norms,
// GeGLU, scaled embeddings, the local/global layer pattern, the local layers'
// RoPE base, from rope_theta, which must be set first) from c.arch; false
// when kvlab does not know the architecture. The other hyper-parameters, the
// sliding window size and the soft caps are the caller's to set. Used by
// load_config and by the simulator's model catalog and config.json import.
bool apply_arch_traits(Config& c);

// Reads and validates the Config of a GGUF model: "{arch}.*" keys for the
// architectures kvlab runs (llama, smollm3, ernie4_5, qwen2, qwen3, qwen3moe, qwen2moe, olmo2, olmoe, phi3, granite, granitemoe, mistral3, gemma, gemma2, gemma3; the table in config.cpp is
// where further llama-like ones are added). Throws kvlab::Error naming the file and the key.
Config load_config(const gguf::File& file);
// Same, opening the file (metadata only; tensor data is mapped, not read).
Config read_config(const std::string& path);

}  // namespace kvlab::model
