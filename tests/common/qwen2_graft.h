// A real qwen2-architecture model for tests, made from a real llama one.
//
// qwen2 differs from llama in two ways kvlab implements: biases on the Q, K
// and V projections, and RoPE over the two halves of each head (NeoX order)
// instead of adjacent pairs. llama.cpp's converter permutes a llama model's
// Q/K rows so that adjacent-pair RoPE on the GGUF rows equals the trained
// model's half-split RoPE: within a head of d rows, GGUF row 2j+k holds
// original row k*d/2+j (k = 0, 1). Undoing that permutation and declaring the
// architecture qwen2 gives the same network under qwen2's rules, with zero
// biases; `bias_scale` > 0 then adds small fixed biases so that they matter.
// `with_biases` = false leaves the bias tensors out (an invalid qwen2 file).
// Everything else (weights, tokenizer, hyper-parameters) is copied unchanged.
//
// tests/golden/stories260K-qwen2.generate.json holds llama.cpp's outputs for
// this graft of stories260K (bias_scale kQwen2GraftBias; tools/qwen2_graft.cpp
// writes the file gen_golden.py reads).
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

inline gguf::Writer qwen2_graft(const gguf::File& llama, float bias_scale, bool with_biases = true) {
  if (llama.require_string("general.architecture") != "llama")
    throw std::runtime_error(llama.path() + ": not a llama model");
  const int64_t n_head = llama.require_int("llama.attention.head_count");
  const int64_t n_embd = llama.require_int("llama.embedding_length");
  const int64_t head_dim = n_embd / n_head;
  if (llama.get_int("llama.rope.dimension_count").value_or(head_dim) != head_dim)
    throw std::runtime_error(llama.path() + ": partial RoPE is not supported by the graft");

  gguf::Writer w;
  for (const auto& [key, value] : llama.metadata()) {
    if (key == "general.architecture") w.set_string(key, "qwen2");
    else if (key.rfind("llama.", 0) == 0) w.copy_value("qwen2." + key.substr(6), value);
    else w.copy_value(key, value);
  }

  // Rows of one head back in their trained order (see the file comment).
  auto unpermute = [&](const gguf::TensorInfo& t) {
    const size_t rows = size_t(t.rows()), row_bytes = size_t(t.n_bytes) / rows, d = size_t(head_dim);
    std::vector<uint8_t> out(t.n_bytes);
    for (size_t h = 0; h < rows / d; ++h)
      for (size_t j = 0; j < d / 2; ++j)
        for (size_t k = 0; k < 2; ++k)
          std::memcpy(&out[(h * d + k * d / 2 + j) * row_bytes], &t.data[(h * d + 2 * j + k) * row_bytes], row_bytes);
    return out;
  };
  auto bias = [&](const std::string& name, size_t n, int layer) {
    std::vector<float> b(n);
    for (size_t i = 0; i < n; ++i) b[i] = bias_scale * std::sin(1.7f * float(i) + 0.3f * float(layer + 1));
    w.add_tensor(name, {n}, tensor::DType::F32, {reinterpret_cast<const uint8_t*>(b.data()), n * sizeof(float)});
  };

  for (const gguf::TensorInfo& t : llama.tensors()) {
    const bool q = t.name.ends_with(".attn_q.weight"), k = t.name.ends_with(".attn_k.weight");
    const bool v = t.name.ends_with(".attn_v.weight");
    if (q || k) {
      const std::vector<uint8_t> rows = unpermute(t);
      w.add_tensor(t.name, t.dims, t.dtype, rows);
    } else {
      w.add_tensor(t.name, t.dims, t.dtype, {t.data, size_t(t.n_bytes)});
    }
    if (with_biases && (q || k || v)) {
      const int layer = std::stoi(t.name.substr(4));  // "blk.N."
      const std::string base = t.name.substr(0, t.name.size() - std::string(".weight").size());
      bias(base + ".bias", size_t(t.rows()), layer);
    }
  }
  return w;
}

}  // namespace kvlab::test
