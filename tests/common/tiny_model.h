// Builds small, random, well-formed llama-architecture GGUF images for tests:
// hand-sized configs whose every tensor can be inspected or corrupted.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gguf/writer.h"
#include "tensor/dtype.h"

namespace kvlab::test {

struct TinySpec {
  int n_layer = 2, n_embd = 64, n_ff = 96, n_head = 4, n_head_kv = 2, n_vocab = 40, n_ctx = 256;
  tensor::DType wtype = tensor::DType::F32;
  bool tied = false;
  float rope_theta = 10000.f;
  uint32_t seed = 1;
  int claimed_layers = -1;  // >= 0: metadata claims this many layers (for missing-tensor tests)
};

inline std::vector<uint8_t> random_tensor(std::mt19937& rng, size_t n, tensor::DType t, float scale) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> x(n);
  for (auto& v : x) v = d(rng);
  const auto& info = tensor::dtype_info(t);
  std::vector<uint8_t> out(n / info.block_size * info.block_bytes);
  info.quantize(x.data(), out.data(), n);
  return out;
}

inline gguf::Writer tiny_llama(const TinySpec& s) {
  gguf::Writer w;
  w.set_string("general.architecture", "llama");
  w.set_string("general.name", "tiny-test");
  w.set_u32("llama.block_count", uint32_t(s.claimed_layers >= 0 ? s.claimed_layers : s.n_layer));
  w.set_u32("llama.embedding_length", uint32_t(s.n_embd));
  w.set_u32("llama.feed_forward_length", uint32_t(s.n_ff));
  w.set_u32("llama.attention.head_count", uint32_t(s.n_head));
  w.set_u32("llama.attention.head_count_kv", uint32_t(s.n_head_kv));
  w.set_u32("llama.context_length", uint32_t(s.n_ctx));
  w.set_f32("llama.rope.freq_base", s.rope_theta);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  std::mt19937 rng(s.seed);
  const uint64_t E = uint64_t(s.n_embd), F = uint64_t(s.n_ff), hd = E / uint64_t(s.n_head);
  const uint64_t kv = hd * uint64_t(s.n_head_kv), V = uint64_t(s.n_vocab);
  auto mat = [&](const std::string& name, uint64_t cols, uint64_t rows) {
    w.add_tensor(name, {cols, rows}, s.wtype, random_tensor(rng, cols * rows, s.wtype, 1.0f / std::sqrt(float(cols))));
  };
  auto norm = [&](const std::string& name) {
    std::vector<float> one(E);
    std::uniform_real_distribution<float> d(0.8f, 1.2f);
    for (auto& v : one) v = d(rng);
    w.add_tensor(name, {E}, tensor::DType::F32, {reinterpret_cast<const uint8_t*>(one.data()), E * 4});
  };
  w.add_tensor("token_embd.weight", {E, V}, s.wtype, random_tensor(rng, E * V, s.wtype, 1.0f));
  norm("output_norm.weight");
  if (!s.tied) mat("output.weight", E, V);
  for (int i = 0; i < s.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight");
    mat(p + "attn_q.weight", E, E);
    mat(p + "attn_k.weight", E, kv);
    mat(p + "attn_v.weight", E, kv);
    mat(p + "attn_output.weight", E, E);
    norm(p + "ffn_norm.weight");
    mat(p + "ffn_gate.weight", E, F);
    mat(p + "ffn_up.weight", E, F);
    mat(p + "ffn_down.weight", F, E);
  }
  return w;
}

}  // namespace kvlab::test
