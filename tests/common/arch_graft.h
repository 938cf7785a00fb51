// Real models of the architectures kvlab runs (smollm3, qwen2, qwen3, the
// mixtures of experts, olmo2, phi3, granite, the gemmas, ...), and a llama model with
// Llama 3's RoPE frequency factors, for tests, made from a real llama one (no
// small model of any of them is at hand).
//
// All three architectures rotate the two halves of each head in RoPE (NeoX order)
// where llama rotates adjacent pairs. llama.cpp's converter permutes a llama
// model's Q/K rows so that adjacent-pair RoPE on the GGUF rows equals the
// trained model's half-split RoPE: within a head of d rows, GGUF row 2j+k
// holds original row k*d/2+j (k = 0, 1). Undoing that permutation keeps the
// attention of the trained model under NeoX RoPE. Then:
//  - qwen2_graft adds fixed Q/K/V biases of bias_scale·sin(1.7i + 0.3(layer+1)).
//    With bias_scale 0 it is the same network as the llama model;
//    with_biases = false leaves the bias tensors out (an invalid qwen2 file).
//  - qwen3_graft adds QK-norm weights near 1 (one RMSNorm per Q and K head
//    before RoPE), which makes it another network than the llama model.
//  - gemma3_graft divides the (f32) token embeddings by sqrt(n_embd), which
//    gemma3 multiplies them by, adds QK-norm and post-norm weights near 1,
//    declares a sliding window of `window` positions, and appends a copy of
//    the last layer so that the model has a global layer (every 6th) after
//    five local ones. The norms and GeGLU make it another network than the
//    llama model: a real one all the same, that llama.cpp runs.
//  - gemma2_graft is gemma3's without QK-norm and without the extra layer
//    (gemma2 alternates local and global layers, starting with a local one),
//    with soft caps on the attention scores and the logits.
//  - ernie4_5_graft is the llama model under ernie4_5's name, the same
//    network.
//  - smollm3_graft is the llama model under smollm3's name, which makes its
//    layer 3 (of 0-4) a NoPE layer: another network, that llama.cpp runs.
//  - phi3_graft packs Q, K and V into one attn_qkv and gate and up into one
//    ffn_up (gate rows first), rotates only the first 6 of each head's 8
//    dimensions (partial RoPE, as Phi-4-mini's 3/4), and adds LongRoPE:
//    long and short factor tensors, an original context of 256 positions
//    (below the fixtures' 512, so the long factors apply) and the attention
//    factor Phi-3's converter derives from it. It also declares a sliding
//    window, which phi3 ignores. Another network than the llama model.
//  - llama3_graft stays llama and adds `rope_freqs.weight`: Llama 3.1's
//    frequency divisors (Meta's apply_scaling; llama.cpp's converter writes
//    them as this tensor), with an original context of 128 positions instead
//    of 8192, so that the test prompts' positions turn the pairs it slows.
//  - yarn_graft stays llama and declares YaRN scaling (rope.scaling.type
//    "yarn", factor 4, an original context of 256 positions): the head's
//    first pair keeps its angles, the second blends, the last two are
//    interpolated, and cos and sin grow by 1 + 0.1 ln 4.
//  - granite_graft is stories260K under granite's name with its four
//    scalars (GraniteScales): scaled embeddings, residual branches,
//    attention scores and logits. Another network than the llama model.
//  - gemma_graft (Gemma 1) is the gemma grafts' shared part: NeoX rows,
//    embeddings divided by sqrt(n_embd) and tied to the output, GeGLU.
//  - mistral3_graft is stories260K under mistral3's name with YaRN
//    parameters of its own (betas, log multiplier) and Llama 4's attention
//    temperature over an original context of 64 positions, so the test
//    positions scale the queries by up to 1 + 0.1 ln 8.
//  - mixtral_graft, qwen3moe_graft (the qwen3 graft's rows and QK-norms),
//    qwen2moe_graft (qwen2's, and a gated shared expert), granitemoe_graft
//    (granite's scalars, an ungated shared expert) and olmoe_graft (whole-Q
//    and whole-K norms, KV heads repeated to MHA) make every layer's FFN a
//    mixture of experts (MoeGraft): expert e of layer i is the llama model's
//    FFN of layer (i + e) mod n_layer, and a fixed wave routes each token to
//    2 of 4. Other networks than the llama model.
//  - olmo2_graft moves the norms after attention and the FFN and normalises
//    all of Q and all of K at once.
// Weights, tokenizer and the other hyper-parameters are copied unchanged.
//
// tests/golden/stories260K-<graft>.generate.json hold llama.cpp's
// outputs for the grafts of stories260K with the k*Graft* constants below
// (tools/arch_graft.cpp writes the files gen_golden.py reads).
#pragma once
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/file.h"
#include "gguf/writer.h"

namespace kvlab::test {

inline constexpr float kQwen2GraftBias = 0.1f;
inline constexpr int kGemma3GraftWindow = 24;
inline constexpr int kGemma2GraftWindow = 24;
// Low enough to bend stories260K's scores and logits (Gemma 2's own are 50 and 30).
struct Gemma2SoftCaps {
  float attention = 2.5f, final = 5.f;
};
// Phi-3's LongRoPE, on 3 of the graft's 4 head pairs; the original context
// is below the fixtures' n_ctx of 512, so the long factors apply.
struct PhiLongRope {
  int rope_dim = 6, original_context = 256, sliding_window = 16;
  std::vector<float> long_factors{1.f, 2.5f, 7.f}, short_factors{1.f, 1.3f, 2.f};
};
// Llama 3.1's scaling rule with these parameters (its own are 8, 1, 4, 8192).
struct Llama3Scaling {
  float factor = 8.f, low_freq_factor = 1.f, high_freq_factor = 4.f, original_context = 128.f;
};

// YaRN's parameters in the graft (Qwen3's 128k files: factor 4 over 32768).
struct YarnScaling {
  float factor = 4.f;
  int original_context = 256;
};

// Granite's scalars for the graft (Granite 3.0 2B's are 12, 0.22, 1/64 and
// 8; these keep the small model's activations in range).
struct GraniteScales {
  float embedding = 1.5f, residual = 0.8f, attention = 0.25f, logit = 2.f;
};

// Ministral 3's rope_parameters in kind (its own: factor 16 over 16384,
// betas 32 and 1, log multiplier 1, temperature 0.1), scaled to the graft.
struct Mistral3Scaling {
  float factor = 4.f, beta_fast = 16.f, beta_slow = 2.f, log_multiplier = 0.5f, temperature = 0.1f;
  int original_context = 64;
};

// The mixture of experts the mixtral and qwen3moe grafts put in each layer.
struct MoeGraft {
  int n_expert = 4, n_expert_used = 2;
  float router_scale = 0.5f;  // the router's (and the shared expert's gate's) amplitude: picks vary by token
};

namespace graft_detail {

inline int64_t head_dim_of(const gguf::File& llama) {
  if (llama.require_string("general.architecture") != "llama")
    throw std::runtime_error(llama.path() + ": not a llama model");
  const int64_t n_head = llama.require_int("llama.attention.head_count");
  const int64_t head_dim = llama.require_int("llama.embedding_length") / n_head;
  if (llama.get_int("llama.rope.dimension_count").value_or(head_dim) != head_dim)
    throw std::runtime_error(llama.path() + ": partial RoPE is not supported by the graft");
  return head_dim;
}

// The llama metadata under `arch`'s keys; `skip` keys are left for the caller.
inline void copy_metadata(const gguf::File& llama, const std::string& arch, gguf::Writer& w,
                          const std::vector<std::string>& skip = {}) {
  for (const auto& [key, value] : llama.metadata()) {
    if (key == "general.architecture") w.set_string(key, arch);
    else if (key.rfind("llama.", 0) == 0) {
      const std::string k = arch + "." + key.substr(6);
      bool skipped = false;
      for (const auto& s : skip) skipped = skipped || s == k;
      if (!skipped) w.copy_value(k, value);
    } else {
      w.copy_value(key, value);
    }
  }
}

// A tensor's bytes, with Q/K rows of each head back in their trained order.
inline std::vector<uint8_t> neox_bytes(const gguf::TensorInfo& t, int64_t head_dim) {
  std::vector<uint8_t> out(t.data, t.data + t.n_bytes);
  if (!t.name.ends_with(".attn_q.weight") && !t.name.ends_with(".attn_k.weight")) return out;
  const size_t rows = size_t(t.rows()), row_bytes = size_t(t.n_bytes) / rows, d = size_t(head_dim);
  for (size_t h = 0; h < rows / d; ++h)
    for (size_t j = 0; j < d / 2; ++j)
      for (size_t k = 0; k < 2; ++k)
        std::memcpy(&out[(h * d + k * d / 2 + j) * row_bytes], &t.data[(h * d + 2 * j + k) * row_bytes], row_bytes);
  return out;
}

inline void add_f32(gguf::Writer& w, const std::string& name, const std::vector<float>& v) {
  w.add_tensor(name, {v.size()}, tensor::DType::F32, {reinterpret_cast<const uint8_t*>(v.data()), v.size() * 4});
}

// YaRN scaling declared under `arch`'s keys.
inline void set_yarn(gguf::Writer& w, const std::string& arch, float factor, int original_context) {
  w.set_string(arch + ".rope.scaling.type", "yarn");
  w.set_f32(arch + ".rope.scaling.factor", factor);
  w.set_u32(arch + ".rope.scaling.original_context_length", uint32_t(original_context));
}

// The llama model as it is, under `arch`'s name and keys.
inline gguf::Writer renamed(const gguf::File& llama, const std::string& arch) {
  gguf::Writer w;
  copy_metadata(llama, arch, w);
  for (const gguf::TensorInfo& t : llama.tensors()) w.add_tensor(t.name, t.dims, t.dtype, {t.data, size_t(t.n_bytes)});
  return w;
}

// n values a·sin(1.7i + 0.3(layer+1)) + b: fixed, different per layer.
inline std::vector<float> wave(size_t n, int layer, float a, float b) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = b + a * std::sin(1.7f * float(i) + 0.3f * float(layer + 1));
  return v;
}

inline int layer_of(const std::string& name) { return std::stoi(name.substr(4)); }  // "blk.N."

// QK-norm weights of layer i: the same in qwen3 and gemma3 grafts.
inline void add_qk_norms(gguf::Writer& w, int i, int64_t head_dim) {
  const std::string p = "blk." + std::to_string(i) + ".";
  add_f32(w, p + "attn_q_norm.weight", wave(size_t(head_dim), i, 0.1f, 1.f));
  add_f32(w, p + "attn_k_norm.weight", wave(size_t(head_dim), i + 7, 0.1f, 1.f));
}

}  // namespace graft_detail

namespace graft_detail {

inline bool is_dense_ffn(const std::string& name) {
  return name.ends_with(".ffn_gate.weight") || name.ends_with(".ffn_up.weight") || name.ends_with(".ffn_down.weight");
}

// qwen2's tensors: NeoX rows and fixed Q/K/V biases (none with
// with_biases = false); the dense FFN's left out unless dense_ffn.
inline void add_qwen2_tensors(gguf::Writer& w, const gguf::File& llama, float bias_scale, bool with_biases,
                              bool dense_ffn) {
  const int64_t head_dim = head_dim_of(llama);
  for (const gguf::TensorInfo& t : llama.tensors()) {
    if (!dense_ffn && is_dense_ffn(t.name)) continue;
    w.add_tensor(t.name, t.dims, t.dtype, neox_bytes(t, head_dim));
    const bool proj = t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_k.weight") ||
                      t.name.ends_with(".attn_v.weight");
    if (with_biases && proj) {
      const std::string base = t.name.substr(0, t.name.size() - std::string(".weight").size());
      add_f32(w, base + ".bias", wave(size_t(t.rows()), layer_of(t.name), bias_scale, 0.f));
    }
  }
}

}  // namespace graft_detail

inline gguf::Writer qwen2_graft(const gguf::File& llama, float bias_scale, bool with_biases = true) {
  gguf::Writer w;
  graft_detail::copy_metadata(llama, "qwen2", w);
  graft_detail::add_qwen2_tensors(w, llama, bias_scale, with_biases, true);
  return w;
}

inline gguf::Writer smollm3_graft(const gguf::File& llama) {
  graft_detail::head_dim_of(llama);  // a llama model
  return graft_detail::renamed(llama, "smollm3");
}

// ERNIE 4.5's dense architecture is llama's block: the llama model renamed.
inline gguf::Writer ernie4_5_graft(const gguf::File& llama) {
  graft_detail::head_dim_of(llama);  // a llama model
  return graft_detail::renamed(llama, "ernie4_5");
}

inline gguf::Writer qwen3_graft(const gguf::File& llama) {
  using namespace graft_detail;
  const int64_t head_dim = head_dim_of(llama), n_layer = llama.require_int("llama.block_count");
  gguf::Writer w;
  copy_metadata(llama, "qwen3", w);
  for (const gguf::TensorInfo& t : llama.tensors()) w.add_tensor(t.name, t.dims, t.dtype, neox_bytes(t, head_dim));
  for (int i = 0; i < n_layer; ++i) add_qk_norms(w, i, head_dim);
  return w;
}

namespace graft_detail {

// What the gemma grafts share: NeoX Q/K rows and embeddings divided by
// sqrt(n_embd); gemma2's and gemma3's add post-norm weights near 1 and a
// sliding window (window > 0); gemma3's adds QK-norm weights and a copy of
// the last layer as its global one; gemma's and gemma2's drop output.weight
// (llama.cpp ties their output to the embeddings and refuses a file that
// has one).
inline gguf::Writer gemma_graft(const gguf::File& llama, const std::string& arch, int window, bool gemma3) {
  const int64_t head_dim = head_dim_of(llama), n_layer = llama.require_int("llama.block_count");
  const int64_t layers = gemma3 ? n_layer + 1 : n_layer;
  const size_t n_embd = size_t(llama.require_int("llama.embedding_length"));
  gguf::Writer w;
  copy_metadata(llama, arch, w, {arch + ".block_count"});
  w.set_u32(arch + ".block_count", uint32_t(layers));
  if (window > 0) w.set_u32(arch + ".attention.sliding_window", uint32_t(window));
  const std::string last = "blk." + std::to_string(n_layer - 1) + ".";
  for (const gguf::TensorInfo& t : llama.tensors()) {
    if (!gemma3 && t.name == "output.weight") continue;
    std::vector<uint8_t> bytes = neox_bytes(t, head_dim);
    if (t.name == "token_embd.weight") {
      if (t.dtype != tensor::DType::F32) throw std::runtime_error(llama.path() + ": the graft needs f32 embeddings");
      std::vector<float> e(bytes.size() / 4);
      std::memcpy(e.data(), bytes.data(), bytes.size());
      for (float& x : e) x /= std::sqrt(float(n_embd));
      std::memcpy(bytes.data(), e.data(), bytes.size());
    }
    w.add_tensor(t.name, t.dims, t.dtype, bytes);
    if (gemma3 && t.name.rfind(last, 0) == 0)  // the copy that becomes the global layer
      w.add_tensor("blk." + std::to_string(n_layer) + "." + t.name.substr(last.size()), t.dims, t.dtype, bytes);
  }
  for (int i = 0; i < layers && window > 0; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    if (gemma3) add_qk_norms(w, i, head_dim);
    add_f32(w, p + "post_attention_norm.weight", wave(n_embd, i + 13, 0.1f, 1.f));
    add_f32(w, p + "post_ffw_norm.weight", wave(n_embd, i + 19, 0.1f, 1.f));
  }
  return w;
}

}  // namespace graft_detail

inline gguf::Writer gemma3_graft(const gguf::File& llama, int window) {
  return graft_detail::gemma_graft(llama, "gemma3", window, true);
}

// Gemma 1: the shared part alone (no window, no post-norms).
inline gguf::Writer gemma_graft(const gguf::File& llama) { return graft_detail::gemma_graft(llama, "gemma", 0, false); }

inline gguf::Writer gemma2_graft(const gguf::File& llama, int window, const Gemma2SoftCaps& caps = {}) {
  gguf::Writer w = graft_detail::gemma_graft(llama, "gemma2", window, false);
  w.set_f32("gemma2.attn_logit_softcapping", caps.attention);
  w.set_f32("gemma2.final_logit_softcapping", caps.final);
  return w;
}

namespace graft_detail {

// The tensors named in `parts`, in order, as one tensor of all their rows.
inline std::vector<uint8_t> stacked_rows(const std::vector<std::vector<uint8_t>>& parts) {
  std::vector<uint8_t> out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace graft_detail

inline gguf::Writer phi3_graft(const gguf::File& llama, const PhiLongRope& r = {}) {
  using namespace graft_detail;
  const int64_t head_dim = head_dim_of(llama), n_layer = llama.require_int("llama.block_count");
  const int64_t n_ctx_train = llama.require_int("llama.context_length");
  gguf::Writer w;
  copy_metadata(llama, "phi3", w, {"phi3.rope.dimension_count"});
  w.set_u32("phi3.rope.dimension_count", uint32_t(r.rope_dim));
  w.set_u32("phi3.rope.scaling.original_context_length", uint32_t(r.original_context));
  // The converter's LongRoPE factor: sqrt(1 + ln(s) / ln(n_orig)), s = n_ctx_train / n_orig.
  const double s = double(n_ctx_train) / r.original_context;
  w.set_f32("phi3.rope.scaling.attn_factor", float(std::sqrt(1.0 + std::log(s) / std::log(double(r.original_context)))));
  w.set_u32("phi3.attention.sliding_window", uint32_t(r.sliding_window));
  auto bytes_of = [&](const std::string& name) { return neox_bytes(*llama.find_tensor(name), head_dim); };
  for (const gguf::TensorInfo& t : llama.tensors()) {
    const bool packed = t.name.ends_with(".attn_q.weight") || t.name.ends_with(".attn_k.weight") ||
                        t.name.ends_with(".attn_v.weight") || t.name.ends_with(".ffn_gate.weight") ||
                        t.name.ends_with(".ffn_up.weight");
    if (!packed) w.add_tensor(t.name, t.dims, t.dtype, neox_bytes(t, head_dim));
  }
  for (int i = 0; i < n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    const gguf::TensorInfo& q = *llama.find_tensor(p + "attn_q.weight");
    const gguf::TensorInfo& k = *llama.find_tensor(p + "attn_k.weight");
    const gguf::TensorInfo& up = *llama.find_tensor(p + "ffn_up.weight");
    w.add_tensor(p + "attn_qkv.weight", {q.dims[0], q.dims[1] + 2 * k.dims[1]}, q.dtype,
                 stacked_rows({bytes_of(p + "attn_q.weight"), bytes_of(p + "attn_k.weight"), bytes_of(p + "attn_v.weight")}));
    w.add_tensor(p + "ffn_up.weight", {up.dims[0], 2 * up.dims[1]}, up.dtype,
                 stacked_rows({bytes_of(p + "ffn_gate.weight"), bytes_of(p + "ffn_up.weight")}));
  }
  add_f32(w, "rope_factors_long.weight", r.long_factors);
  add_f32(w, "rope_factors_short.weight", r.short_factors);
  return w;
}

// Pair i of theta^(-2i/d) turns with wavelength 2π/freq: pairs shorter than
// original_context / high_freq_factor keep their frequency, pairs longer than
// original_context / low_freq_factor are slowed by `factor`, and those between
// blend the two. The tensor holds each pair's divisor.
inline std::vector<float> llama3_rope_divisors(size_t rope_dim, float theta, const Llama3Scaling& s) {
  std::vector<float> divisors(rope_dim / 2);
  for (size_t i = 0; i < divisors.size(); ++i) {
    const double freq = std::pow(double(theta), -2.0 * double(i) / double(rope_dim));
    const double wavelen = 2.0 * M_PI / freq;
    const double long_wave = s.original_context / s.low_freq_factor, short_wave = s.original_context / s.high_freq_factor;
    if (wavelen < short_wave) divisors[i] = 1.f;
    else if (wavelen > long_wave) divisors[i] = s.factor;
    else {
      const double smooth = (s.original_context / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      divisors[i] = float(1.0 / ((1.0 - smooth) / s.factor + smooth));
    }
  }
  return divisors;
}

// With the given divisors, whatever their count or values (tests of the checks).
inline gguf::Writer llama3_graft(const gguf::File& llama, const std::vector<float>& divisors) {
  gguf::Writer w = graft_detail::renamed(llama, "llama");
  graft_detail::add_f32(w, "rope_freqs.weight", divisors);
  return w;
}

inline gguf::Writer llama3_graft(const gguf::File& llama, const Llama3Scaling& s = {}) {
  const float theta = float(llama.get_float("llama.rope.freq_base").value_or(10000.0));
  return llama3_graft(llama, llama3_rope_divisors(size_t(graft_detail::head_dim_of(llama)), theta, s));
}

namespace graft_detail {

inline void set_granite_scales(gguf::Writer& w, const std::string& arch, const GraniteScales& s) {
  w.set_f32(arch + ".embedding_scale", s.embedding);
  w.set_f32(arch + ".residual_scale", s.residual);
  w.set_f32(arch + ".attention.scale", s.attention);
  w.set_f32(arch + ".logit_scale", s.logit);
}

}  // namespace graft_detail

inline gguf::Writer granite_graft(const gguf::File& llama, const GraniteScales& s = {}) {
  gguf::Writer w = graft_detail::renamed(llama, "granite");
  graft_detail::set_granite_scales(w, "granite", s);
  return w;
}

inline gguf::Writer mistral3_graft(const gguf::File& llama, const Mistral3Scaling& m = {}) {
  gguf::Writer w = graft_detail::renamed(llama, "mistral3");
  graft_detail::set_yarn(w, "mistral3", m.factor, m.original_context);
  w.set_f32("mistral3.rope.scaling.yarn_beta_fast", m.beta_fast);
  w.set_f32("mistral3.rope.scaling.yarn_beta_slow", m.beta_slow);
  w.set_f32("mistral3.rope.scaling.yarn_log_multiplier", m.log_multiplier);
  w.set_f32("mistral3.attention.temperature_scale", m.temperature);
  return w;
}

namespace graft_detail {

// The llama model's tensors but its dense FFN's, which a mixture of experts
// replaces; Q/K rows in NeoX order where `neox`.
inline void add_all_but_ffn(gguf::Writer& w, const gguf::File& llama, bool neox) {
  const int64_t head_dim = head_dim_of(llama);
  for (const gguf::TensorInfo& t : llama.tensors())
    if (!is_dense_ffn(t.name))
      w.add_tensor(t.name, t.dims, t.dtype, neox ? neox_bytes(t, head_dim) : std::vector<uint8_t>(t.data, t.data + t.n_bytes));
}

// The bytes of layer `layer`'s dense FFN matrix `kind` (gate, up, down).
inline const gguf::TensorInfo& ffn_of(const gguf::File& llama, int64_t layer, const std::string& kind) {
  return *llama.find_tensor("blk." + std::to_string(layer) + ".ffn_" + kind + ".weight");
}

// Every layer's FFN as a mixture of experts: expert e of layer i is the
// llama model's FFN of layer (i + e) mod n_layer (trained weights, different
// per expert), stacked into the 3-D ffn_{gate,up,down}_exps tensors, and
// the router a fixed wave.
inline void add_experts(gguf::Writer& w, const gguf::File& llama, const std::string& arch, const MoeGraft& m) {
  const int64_t n_layer = llama.require_int("llama.block_count");
  const uint64_t n_embd = uint64_t(llama.require_int("llama.embedding_length"));
  w.set_u32(arch + ".expert_count", uint32_t(m.n_expert));
  w.set_u32(arch + ".expert_used_count", uint32_t(m.n_expert_used));
  for (int i = 0; i < n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    for (const std::string kind : {"gate", "up", "down"}) {
      std::vector<std::vector<uint8_t>> experts;
      for (int e = 0; e < m.n_expert; ++e) {
        const gguf::TensorInfo& t = ffn_of(llama, (i + e) % n_layer, kind);
        experts.emplace_back(t.data, t.data + t.n_bytes);
      }
      const gguf::TensorInfo& t = ffn_of(llama, i, kind);
      w.add_tensor(p + "ffn_" + kind + "_exps.weight", {t.dims[0], t.dims[1], uint64_t(m.n_expert)}, t.dtype,
                   stacked_rows(experts));
    }
    const std::vector<float> router = wave(n_embd * uint64_t(m.n_expert), i + 23, m.router_scale, 0.f);
    w.add_tensor(p + "ffn_gate_inp.weight", {n_embd, uint64_t(m.n_expert)}, tensor::DType::F32,
                 {reinterpret_cast<const uint8_t*>(router.data()), router.size() * 4});
  }
}

// A shared expert in every layer, as wide as the llama model's FFN: layer
// i's is the FFN of layer (i + n_expert) mod n_layer, one no expert of the
// layer copies (in stories260K's 5 layers with 4 experts); with `gated`, a
// sigmoid gate of fixed weights (qwen2moe).
inline void add_shared_experts(gguf::Writer& w, const gguf::File& llama, const std::string& arch, const MoeGraft& m,
                               bool gated) {
  const int64_t n_layer = llama.require_int("llama.block_count");
  const uint64_t n_embd = uint64_t(llama.require_int("llama.embedding_length"));
  w.set_u32(arch + ".expert_shared_feed_forward_length", uint32_t(llama.require_int("llama.feed_forward_length")));
  for (int i = 0; i < n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    for (const std::string kind : {"gate", "up", "down"}) {
      const gguf::TensorInfo& t = ffn_of(llama, (i + m.n_expert) % n_layer, kind);
      w.add_tensor(p + "ffn_" + kind + "_shexp.weight", t.dims, t.dtype, {t.data, size_t(t.n_bytes)});
    }
    if (gated) add_f32(w, p + "ffn_gate_inp_shexp.weight", wave(n_embd, i + 29, m.router_scale, 0.f));
  }
}

// OLMo's QK-norm weights near 1: one over all of Q, one over all of K.
inline void add_whole_qk_norms(gguf::Writer& w, int i, size_t q_dim, size_t kv_dim) {
  const std::string p = "blk." + std::to_string(i) + ".";
  add_f32(w, p + "attn_q_norm.weight", wave(q_dim, i, 0.1f, 1.f));
  add_f32(w, p + "attn_k_norm.weight", wave(kv_dim, i + 7, 0.1f, 1.f));
}

// K or V rows with each KV head repeated for the `group` query heads that
// read it: grouped-query attention as multi-head attention, the same network.
inline std::vector<uint8_t> repeated_heads(const std::vector<uint8_t>& rows, size_t row_bytes, size_t head_dim,
                                           size_t group) {
  std::vector<uint8_t> out;
  const size_t head_bytes = head_dim * row_bytes;
  for (size_t h = 0; h < rows.size() / head_bytes; ++h)
    for (size_t g = 0; g < group; ++g) out.insert(out.end(), rows.begin() + h * head_bytes, rows.begin() + (h + 1) * head_bytes);
  return out;
}

}  // namespace graft_detail

// Mixtral: llama with a mixture of experts in every layer.
inline gguf::Writer mixtral_graft(const gguf::File& llama, const MoeGraft& m = {}) {
  gguf::Writer w;
  graft_detail::copy_metadata(llama, "llama", w);
  graft_detail::add_all_but_ffn(w, llama, false);
  graft_detail::add_experts(w, llama, "llama", m);
  return w;
}

// qwen3moe: qwen3's graft (NeoX rows, QK-norm) with a mixture of experts in
// every layer, each expert as wide as the llama model's FFN.
inline gguf::Writer qwen3moe_graft(const gguf::File& llama, const MoeGraft& m = {}) {
  using namespace graft_detail;
  const int64_t head_dim = head_dim_of(llama), n_layer = llama.require_int("llama.block_count");
  gguf::Writer w;
  copy_metadata(llama, "qwen3moe", w);
  w.set_u32("qwen3moe.expert_feed_forward_length", uint32_t(llama.require_int("llama.feed_forward_length")));
  add_all_but_ffn(w, llama, true);
  for (int i = 0; i < n_layer; ++i) add_qk_norms(w, i, head_dim);
  add_experts(w, llama, "qwen3moe", m);
  return w;
}

// qwen2moe: qwen2's graft (NeoX rows, Q/K/V biases) with experts whose
// weights are not renormalised, and a gated shared expert.
inline gguf::Writer qwen2moe_graft(const gguf::File& llama, const MoeGraft& m = {}) {
  using namespace graft_detail;
  gguf::Writer w;
  copy_metadata(llama, "qwen2moe", w);
  w.set_u32("qwen2moe.expert_feed_forward_length", uint32_t(llama.require_int("llama.feed_forward_length")));
  add_qwen2_tensors(w, llama, kQwen2GraftBias, true, false);
  add_experts(w, llama, "qwen2moe", m);
  add_shared_experts(w, llama, "qwen2moe", m, true);
  return w;
}

// granitemoe: granite's scalars, experts (each n_ff wide, as granitemoe
// reads them) and an ungated shared expert.
inline gguf::Writer granitemoe_graft(const gguf::File& llama, const MoeGraft& m = {}, const GraniteScales& s = {}) {
  using namespace graft_detail;
  gguf::Writer w;
  copy_metadata(llama, "granitemoe", w);
  set_granite_scales(w, "granitemoe", s);
  add_all_but_ffn(w, llama, false);
  add_experts(w, llama, "granitemoe", m);
  add_shared_experts(w, llama, "granitemoe", m, false);
  return w;
}

// olmoe: NeoX rows, QK-norm over all of Q and all of K, and experts whose
// weights are not renormalised. llama.cpp's olmoe has K as wide as Q, so the
// graft repeats each KV head for the query heads that read it.
inline gguf::Writer olmoe_graft(const gguf::File& llama, const MoeGraft& m = {}) {
  using namespace graft_detail;
  const int64_t head_dim = head_dim_of(llama), n_layer = llama.require_int("llama.block_count");
  const int64_t n_head = llama.require_int("llama.attention.head_count");
  const size_t group = size_t(n_head / llama.get_int("llama.attention.head_count_kv").value_or(n_head));
  gguf::Writer w;
  copy_metadata(llama, "olmoe", w, {"olmoe.attention.head_count_kv"});
  w.set_u32("olmoe.attention.head_count_kv", uint32_t(n_head));
  for (const gguf::TensorInfo& t : llama.tensors()) {
    if (is_dense_ffn(t.name)) continue;
    std::vector<uint8_t> bytes = neox_bytes(t, head_dim);
    const bool kv = t.name.ends_with(".attn_k.weight") || t.name.ends_with(".attn_v.weight");
    if (!kv) w.add_tensor(t.name, t.dims, t.dtype, bytes);
    else w.add_tensor(t.name, {t.dims[0], t.dims[1] * group}, t.dtype,
                      repeated_heads(bytes, size_t(t.n_bytes) / size_t(t.rows()), size_t(head_dim), group));
  }
  const size_t q_dim = size_t(n_head * head_dim);
  for (int i = 0; i < n_layer; ++i) add_whole_qk_norms(w, i, q_dim, q_dim);
  add_experts(w, llama, "olmoe", m);
  return w;
}

// olmo2: NeoX rows, QK-norm over all of Q and all of K, and norms after
// attention and the FFN (weights near 1) instead of before them.
inline gguf::Writer olmo2_graft(const gguf::File& llama) {
  using namespace graft_detail;
  const int64_t head_dim = head_dim_of(llama), n_layer = llama.require_int("llama.block_count");
  const int64_t n_head = llama.require_int("llama.attention.head_count");
  const int64_t n_kv = llama.get_int("llama.attention.head_count_kv").value_or(n_head);
  const size_t n_embd = size_t(llama.require_int("llama.embedding_length"));
  gguf::Writer w;
  copy_metadata(llama, "olmo2", w);
  for (const gguf::TensorInfo& t : llama.tensors())
    if (!t.name.ends_with(".attn_norm.weight") && !t.name.ends_with(".ffn_norm.weight"))
      w.add_tensor(t.name, t.dims, t.dtype, neox_bytes(t, head_dim));
  for (int i = 0; i < n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    add_whole_qk_norms(w, i, size_t(n_head * head_dim), size_t(n_kv * head_dim));
    add_f32(w, p + "post_attention_norm.weight", wave(n_embd, i + 13, 0.1f, 1.f));
    add_f32(w, p + "post_ffw_norm.weight", wave(n_embd, i + 19, 0.1f, 1.f));
  }
  return w;
}

inline gguf::Writer yarn_graft(const gguf::File& llama, const YarnScaling& y = {}) {
  gguf::Writer w = graft_detail::renamed(llama, "llama");
  graft_detail::set_yarn(w, "llama", y.factor, y.original_context);
  return w;
}

}  // namespace kvlab::test
