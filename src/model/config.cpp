#include "model/config.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <optional>
#include <string>

#include "common/error.h"
#include "gguf/file.h"

namespace kvlab::model {
namespace {

// What differs between architectures at the Config level. The forward pass
// reads these flags; a new llama-like architecture is one row here plus any
// tensors it adds (biases, extra norms) in weights.cpp.
enum class Experts { None, Optional, Required };

struct ArchSpec {
  std::string_view name;
  RopeOrder rope_order = RopeOrder::Normal;
  bool qkv_bias = false;
  bool qk_norm = false, post_norms = false, scale_embeddings = false;
  FfnAct ffn_act = FfnAct::SiLU;
  bool fused_gate_up = false;
  bool granite_scales = false;  // {arch}.embedding_scale, residual_scale, attention.scale, logit_scale
  // {arch}.rope.scaling.yarn_beta_fast/_slow/_log_multiplier and
  // attention.temperature_scale (the other architectures' files may carry
  // them, and llama.cpp ignores them there)
  bool yarn_keys = false;
  int swa_pattern = 0;
  bool swa_rope_base_is_global = false;  // local layers use rope.freq_base too, not 10000
  int no_rope_step = 0;  // every no_rope_step-th layer applies no RoPE (NoPE)
  // Whether the FFN may be (Optional: when {arch}.expert_count > 0) or must be
  // a mixture of experts, as llama.cpp builds it for the architecture.
  Experts experts = Experts::None;
  bool expert_weights_norm = true;
  // No expert_feed_forward_length: each expert is n_ff / n_expert_used wide
  // (qwen2moe, qwen3moe), else n_ff (llama.cpp's defaults).
  bool experts_split_n_ff = false;
  // A shared expert: always (its width defaults to n_ff), or when
  // {arch}.expert_shared_feed_forward_length > 0; gated by a sigmoid.
  Experts shared_expert = Experts::None;
  bool shared_expert_gated = false;
  bool qk_norm_whole = false, input_norms = true;
  // What a file without the key gets, as llama.cpp gives it.
  int default_swa_window = 0;
  float default_attn_softcap = 0.f, default_final_softcap = 0.f;
};
// qwen2 is llama with biases on the Q, K and V projections and RoPE over the
// two halves of each head (llama.cpp: LLM_ARCH_QWEN2, rope type NEOX; its GGUF
// converter does not permute Q/K rows as it does for llama).
// qwen3 is qwen2 without the biases and with QK-norm: an RMSNorm over each
// Q and K head before RoPE (llama.cpp: LLM_ARCH_QWEN3, rope type NEOX).
// gemma3 adds QK-norm, post-attention and post-FFN norms, embeddings scaled by
// sqrt(n_embd), GeGLU, and five local (sliding-window, RoPE base 10000)
// layers for each global one (llama.cpp: LLM_ARCH_GEMMA3, swa pattern 6).
// ernie4_5 (ERNIE 4.5's dense models) is llama's block under its own name
// (LLM_ARCH_ERNIE4_5; an attention output bias, which some files carry, is
// refused as for llama).
// smollm3 is llama with no RoPE in every fourth layer (layers 3, 7, ...:
// llama.cpp's n_no_rope_layer_step, fixed at 4, no GGUF key).
// phi3 is llama with RoPE over head halves (NEOX), the gate and up
// projections in one matrix (gate rows first: llama.cpp's fused SwiGLU), and
// often Q, K and V in one (attn_qkv, which any architecture may have).
// Phi-3's sliding window is ignored, as llama.cpp does (its converters write
// the key wrongly), and the 128k models' LongRoPE factors are divisors
// chosen by the context size (weights.h).
// granite (IBM Granite 3) is llama with four scalars (muP-style): the
// embeddings times embedding_scale, each block's output times residual_scale
// before its residual add, attention.scale in place of 1/sqrt(head_dim), and
// the logits divided by logit_scale (llama.cpp: LLM_ARCH_GRANITE).
// gemma (Gemma 1) is the gemma family's common part: NEOX RoPE, embeddings
// scaled by sqrt(n_embd), GeGLU, no window, norms or caps (LLM_ARCH_GEMMA).
// mistral3 (Ministral 3) is llama with YaRN parameters in the file and
// Llama 4's attention temperature: queries scaled up with the position
// (Config::attn_temperature; LLM_ARCH_MISTRAL3).
// llama with experts is Mixtral (llama.cpp's LLM_ARCH_LLAMA with
// expert_count > 0). qwen3moe is qwen3 with a mixture of experts in every
// layer (LLM_ARCH_QWEN3MOE). Both normalise the picked experts' weights, as
// granitemoe (granite's scalars, experts, an optional shared expert) does;
// qwen2moe (qwen2 with experts and a sigmoid-gated shared expert) and olmoe
// do not.
// olmo2 (OLMo 2) normalises the outputs of attention and the FFN instead of
// their inputs (post_norms, no input norms), and all of Q and all of K at
// once before RoPE; olmoe has the input norms, the same QK-norm and experts.
// gemma2 is gemma3 without QK-norm, with one local layer for each global one
// (pattern 2), one RoPE base for both, and soft-capped attention scores
// (llama.cpp: LLM_ARCH_GEMMA2).
// Its GGUF norm weights already hold the 1 + w of the trained model (the
// converter adds the 1), so every RMSNorm here multiplies by the weight.
constexpr std::array kArchs = {
    ArchSpec{.name = "llama", .experts = Experts::Optional},
    ArchSpec{.name = "smollm3", .no_rope_step = 4},
    ArchSpec{.name = "ernie4_5"},
    ArchSpec{.name = "qwen2", .rope_order = RopeOrder::NeoX, .qkv_bias = true},
    ArchSpec{.name = "qwen3", .rope_order = RopeOrder::NeoX, .qk_norm = true},
    ArchSpec{.name = "qwen3moe", .rope_order = RopeOrder::NeoX, .qk_norm = true, .experts = Experts::Required,
             .experts_split_n_ff = true},
    ArchSpec{.name = "qwen2moe",
             .rope_order = RopeOrder::NeoX,
             .qkv_bias = true,
             .experts = Experts::Required,
             .expert_weights_norm = false,
             .experts_split_n_ff = true,
             .shared_expert = Experts::Required,
             .shared_expert_gated = true},
    ArchSpec{.name = "olmo2", .rope_order = RopeOrder::NeoX, .qk_norm = true, .post_norms = true,
             .qk_norm_whole = true, .input_norms = false},
    ArchSpec{.name = "olmoe", .rope_order = RopeOrder::NeoX, .qk_norm = true, .experts = Experts::Required,
             .expert_weights_norm = false, .qk_norm_whole = true},
    ArchSpec{.name = "phi3", .rope_order = RopeOrder::NeoX, .fused_gate_up = true},
    ArchSpec{.name = "granite", .granite_scales = true, .experts = Experts::Optional,
             .shared_expert = Experts::Optional},
    ArchSpec{.name = "granitemoe", .granite_scales = true, .experts = Experts::Required,
             .shared_expert = Experts::Optional},
    ArchSpec{.name = "mistral3", .yarn_keys = true},
    ArchSpec{.name = "gemma", .rope_order = RopeOrder::NeoX, .scale_embeddings = true, .ffn_act = FfnAct::GeluTanh},
    ArchSpec{.name = "gemma2",
             .rope_order = RopeOrder::NeoX,
             .post_norms = true,
             .scale_embeddings = true,
             .ffn_act = FfnAct::GeluTanh,
             .swa_pattern = 2,
             .swa_rope_base_is_global = true,
             .default_swa_window = 4096,
             .default_attn_softcap = 50.f,
             .default_final_softcap = 30.f},
    ArchSpec{.name = "gemma3",
             .rope_order = RopeOrder::NeoX,
             .qk_norm = true,
             .post_norms = true,
             .scale_embeddings = true,
             .ffn_act = FfnAct::GeluTanh,
             .swa_pattern = 6},
};

const ArchSpec* find_arch(std::string_view name) {
  for (const auto& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

int positive(const gguf::File& f, const std::string& key, int64_t v, int64_t max) {
  if (v < 1 || v > max)
    throw Error(f.path() + ": key '" + key + "' = " + std::to_string(v) + " is out of range 1.." + std::to_string(max));
  return int(v);
}

// {arch}.rope.scaling.*, as llama.cpp reads them: the factor applies unless
// the type is "none" (a file without a type is linear), "longrope" scales
// as linear does (Phi-3's factors are tensors: weights.h), and "yarn" adds
// the ramp between the pairs that wrap fewer than beta_slow and more than
// beta_fast times in the original context (1 and 32 unless the
// architecture reads them from the file; ggml_rope_yarn_corr_dims):
//   dim(beta) = rope_dim * ln(n_orig / (2 pi beta)) / (2 ln theta),
//   ramp = [max(0, floor(dim(beta_fast))), min(rope_dim - 1, ceil(dim(beta_slow)))].
void read_rope_scaling(const gguf::File& f, const std::string& p, const ArchSpec& spec, Config& c) {
  const std::string orig = p + "rope.scaling.original_context_length";
  c.rope_orig_ctx = f.get_int(orig) ? positive(f, orig, *f.get_int(orig), 1 << 24) : c.n_ctx_train;
  c.rope_attn_factor = float(f.get_float(p + "rope.scaling.attn_factor").value_or(1.0));
  if (!(c.rope_attn_factor > 0.f && c.rope_attn_factor < 100.f))
    throw Error(f.path() + ": rope.scaling.attn_factor must be in (0, 100)");
  const std::string type = f.get_string(p + "rope.scaling.type").value_or("linear");
  if (type != "none" && type != "linear" && type != "yarn" && type != "longrope")
    throw Error(f.path() + ": rope scaling '" + type + "' is not supported (linear, yarn and longrope are)");
  if (type == "none") return;
  const double factor = f.get_float(p + "rope.scaling.factor").value_or(f.get_float(p + "rope.scale_linear").value_or(0.0));
  if (factor != 0.0) {
    if (!(factor >= 1.0 && factor <= 1024.0)) throw Error(f.path() + ": rope.scaling.factor out of range");
    c.rope_freq_scale = float(1.0 / factor);
  }
  if (type != "yarn") return;
  c.rope_yarn = true;
  float beta_fast = 32.0f, beta_slow = 1.0f, log_mul = 0.0f;
  if (spec.yarn_keys) {
    beta_fast = float(f.get_float(p + "rope.scaling.yarn_beta_fast").value_or(beta_fast));
    beta_slow = float(f.get_float(p + "rope.scaling.yarn_beta_slow").value_or(beta_slow));
    log_mul = float(f.get_float(p + "rope.scaling.yarn_log_multiplier").value_or(0.0));
    if (!(beta_fast > 0.f && beta_slow > 0.f && log_mul >= 0.f && log_mul < 100.f))
      throw Error(f.path() + ": rope.scaling.yarn_beta_fast, _slow and _log_multiplier out of range");
  }
  auto dim = [&](float beta) {
    return float(c.rope_dim) * std::log(float(c.rope_orig_ctx) / (beta * 2.0f * float(M_PI))) / (2.0f * std::log(c.rope_theta));
  };
  c.rope_yarn_ramp[0] = std::max(0.0f, std::floor(dim(beta_fast)));
  c.rope_yarn_ramp[1] = std::min(float(c.rope_dim - 1), std::ceil(dim(beta_slow)));
  // llama.cpp's cos and sin factor for YaRN (llama_context): the magnitude
  // YaRN's paper gives, over the one the kernel then applies (so only the
  // log-multiplier's ratio remains), times the file's attn_factor.
  auto mscale = [](float s, float m) { return s <= 1.0f ? 1.0f : 0.1f * m * std::log(s) + 1.0f; };
  const float factor_f = 1.0f / c.rope_freq_scale;
  float attn = log_mul != 0.0f ? mscale(factor_f, 1.0f) / mscale(factor_f, log_mul) : mscale(factor_f, 1.0f);
  attn *= 1.0f / (1.0f + 0.1f * std::log(factor_f));
  c.rope_attn_factor = attn * c.rope_attn_factor;
}

// {arch}.expert_count, expert_used_count and expert_feed_forward_length,
// where the architecture has experts. An expert's width defaults as
// llama.cpp's does: n_ff for llama (Mixtral's feed_forward_length is the
// expert's), n_ff / n_expert_used for qwen3moe.
void read_experts(const gguf::File& f, const std::string& p, const ArchSpec& spec, Config& c) {
  const std::optional<int64_t> count = f.get_int(p + "expert_count");
  if (spec.experts == Experts::None || (spec.experts == Experts::Optional && count.value_or(0) == 0)) {
    if (f.find_tensor("blk.0.ffn_gate_inp.weight"))
      throw Error(f.path() + ": " + c.arch + " with experts is not supported (no " + p + "expert_count)");
    return;
  }
  if (!count) throw Error(f.path() + ": missing required key '" + p + "expert_count'");
  c.n_expert = positive(f, p + "expert_count", *count, 1024);
  // Models pick 1 to 10 experts per token; the bound keeps a pass's
  // per-pick buffers (Workspace::expert_sum) in proportion to the model.
  constexpr int kMaxExpertsPerToken = 32;
  const std::string used = p + "expert_used_count";
  c.n_expert_used = positive(f, used, f.require_int(used), std::min(c.n_expert, kMaxExpertsPerToken));
  const std::string width = p + "expert_feed_forward_length";
  const int fallback = spec.experts_split_n_ff ? c.n_ff / c.n_expert_used : c.n_ff;
  c.n_ff_exp = f.get_int(width) ? positive(f, width, *f.get_int(width), 1 << 20) : std::max(1, fallback);
  const std::string shared = p + "expert_shared_feed_forward_length";
  const int64_t shared_width = f.get_int(shared).value_or(spec.shared_expert == Experts::Required ? c.n_ff : 0);
  if (spec.shared_expert != Experts::None && shared_width != 0) c.n_ff_shexp = positive(f, shared, shared_width, 1 << 20);
}

// Llama 4's attention temperature where the architecture reads it: 0 (none)
// or a positive scale, over the original context (attn_temperature).
void read_attn_temperature(const gguf::File& f, const std::string& p, const ArchSpec& spec, Config& c) {
  if (!spec.yarn_keys) return;
  c.attn_temp_scale = float(f.get_float(p + "attention.temperature_scale").value_or(0.0));
  if (!(c.attn_temp_scale >= 0.f && c.attn_temp_scale < 100.f))
    throw Error(f.path() + ": attention.temperature_scale must be in [0, 100)");
}

// granite's scalars: logit_scale is required (as llama.cpp requires it),
// the others optional; 0 or absent means unused, as there.
void read_granite_scales(const gguf::File& f, const std::string& p, Config& c) {
  auto scalar = [&](const std::string& key, bool required) {
    const std::optional<double> v = f.get_float(p + key);
    if (!v && required) throw Error(f.path() + ": missing required key '" + p + key + "'");
    const float x = float(v.value_or(0.0));
    if (!(x >= 0.f && x < 1e6f)) throw Error(f.path() + ": key '" + p + key + "' must be in [0, 1e6)");
    return x;
  };
  c.logit_scale = scalar("logit_scale", true);
  c.embedding_scale = scalar("embedding_scale", false);
  c.residual_scale = scalar("residual_scale", false);
  c.attention_scale = scalar("attention.scale", false);
}

}  // namespace

bool apply_arch_traits(Config& c) {
  const ArchSpec* spec = find_arch(c.arch);
  if (!spec) return false;
  c.rope_order = spec->rope_order;
  c.qkv_bias = spec->qkv_bias;
  c.qk_norm = spec->qk_norm;
  c.post_norms = spec->post_norms;
  c.scale_embeddings = spec->scale_embeddings;
  c.ffn_act = spec->ffn_act;
  c.fused_gate_up = spec->fused_gate_up;
  c.swa_pattern = spec->swa_pattern;
  c.no_rope_step = spec->no_rope_step;
  c.expert_weights_norm = spec->experts != Experts::None && spec->expert_weights_norm;
  c.shared_expert_gated = spec->shared_expert_gated;
  c.qk_norm_whole = spec->qk_norm_whole;
  c.input_norms = spec->input_norms;
  if (spec->swa_rope_base_is_global) c.rope_theta_swa = c.rope_theta;
  return true;
}

Config load_config(const gguf::File& f) {
  Config c;
  c.arch = f.require_string("general.architecture");
  const ArchSpec* spec = find_arch(c.arch);
  if (!spec) {
    std::string known;
    for (const auto& a : kArchs) known += (known.empty() ? "" : ", ") + std::string(a.name);
    throw Error(f.path() + ": unsupported architecture '" + c.arch + "' (supported: " + known + ")");
  }
  c.name = f.get_string("general.name").value_or("");
  const std::string p = c.arch + ".";
  auto req = [&](const char* key, int64_t max) { return positive(f, p + key, f.require_int(p + key), max); };
  c.n_layer = req("block_count", 1024);
  c.n_embd = req("embedding_length", 1 << 17);
  c.n_ff = req("feed_forward_length", 1 << 20);
  c.n_head = req("attention.head_count", 1024);
  c.n_head_kv = f.get_int(p + "attention.head_count_kv")
                    ? positive(f, p + "attention.head_count_kv", *f.get_int(p + "attention.head_count_kv"), 1024)
                    : c.n_head;
  c.n_ctx_train = req("context_length", 1 << 24);
  if (c.n_head % c.n_head_kv != 0)
    throw Error(f.path() + ": head_count " + std::to_string(c.n_head) + " is not a multiple of head_count_kv " +
                std::to_string(c.n_head_kv));
  if (auto kl = f.get_int(p + "attention.key_length")) c.head_dim = positive(f, p + "attention.key_length", *kl, 4096);
  else {
    if (c.n_embd % c.n_head != 0)
      throw Error(f.path() + ": embedding_length is not a multiple of head_count and key_length is absent");
    c.head_dim = c.n_embd / c.n_head;
  }
  if (auto vl = f.get_int(p + "attention.value_length"); vl && *vl != c.head_dim)
    throw Error(f.path() + ": value_length != key_length is not supported");
  c.rope_dim = f.get_int(p + "rope.dimension_count") ? positive(f, p + "rope.dimension_count",
                                                                *f.get_int(p + "rope.dimension_count"), c.head_dim)
                                                     : c.head_dim;
  if (c.rope_dim % 2 != 0) throw Error(f.path() + ": rope.dimension_count must be even");
  c.rope_theta = float(f.get_float(p + "rope.freq_base").value_or(10000.0));
  if (!(c.rope_theta > 1.0f)) throw Error(f.path() + ": rope.freq_base must be > 1");
  apply_arch_traits(c);
  if (c.swa_pattern > 0) {
    c.swa_window = spec->default_swa_window;
    if (auto w = f.get_int(p + "attention.sliding_window"); w && *w > 0)
      c.swa_window = positive(f, p + "attention.sliding_window", *w, 1 << 24);
  }
  read_rope_scaling(f, p, *spec, c);
  read_attn_temperature(f, p, *spec, c);
  read_experts(f, p, *spec, c);
  c.final_logit_softcap = float(f.get_float(p + "final_logit_softcapping").value_or(spec->default_final_softcap));
  if (!(c.final_logit_softcap >= 0.f)) throw Error(f.path() + ": final_logit_softcapping must be >= 0");
  c.attn_softcap = float(f.get_float(p + "attn_logit_softcapping").value_or(spec->default_attn_softcap));
  if (!(c.attn_softcap >= 0.f)) throw Error(f.path() + ": attn_logit_softcapping must be >= 0");
  if (spec->granite_scales) read_granite_scales(f, p, c);
  c.rms_eps = float(f.get_float(p + "attention.layer_norm_rms_epsilon").value_or(1e-5));
  if (!(c.rms_eps > 0.f && c.rms_eps < 1.f)) throw Error(f.path() + ": layer_norm_rms_epsilon out of range");

  const gguf::TensorInfo* embd = f.find_tensor("token_embd.weight");
  if (!embd) throw Error(f.path() + ": missing required tensor 'token_embd.weight'");
  if (embd->dims.size() != 2 || embd->dims[0] != uint64_t(c.n_embd))
    throw Error(f.path() + ": tensor 'token_embd.weight' must be [" + std::to_string(c.n_embd) + ", n_vocab]");
  c.n_vocab = int(embd->dims[1]);
  if (auto vs = f.get_int(p + "vocab_size"); vs && *vs != c.n_vocab)
    throw Error(f.path() + ": vocab_size " + std::to_string(*vs) + " does not match token_embd rows " +
                std::to_string(c.n_vocab));
  c.tied_embeddings = f.find_tensor("output.weight") == nullptr;
  return c;
}

Config read_config(const std::string& path) { return load_config(gguf::File::open(path)); }

}  // namespace kvlab::model
