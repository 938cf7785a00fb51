#include "model/weights.h"

#include <string>

#include "common/error.h"
#include "kernels/dot.h"
#include "kernels/rows8.h"

namespace kvlab::model {
namespace {

WeightMatrix matrix(const gguf::File& f, const std::string& name, int rows, int cols) {
  const gguf::TensorInfo& t = f.require_tensor(name, {uint64_t(cols), uint64_t(rows)});
  kernels::dot_kernel(t.dtype);  // throws if no kernel serves this dtype
  WeightMatrix m;
  m.dtype = t.dtype;
  m.data = t.data;
  m.rows = size_t(rows);
  m.cols = size_t(cols);
  m.row_bytes = t.n_bytes / size_t(rows);
  return m;
}

// Rows [first, first + n) of a matrix that packs several (fused QKV, gate
// and up), as a matrix of its own: relayout_for_kernels re-lays each part out
// by itself.
WeightMatrix rows_of(const WeightMatrix& m, int first, int n) {
  WeightMatrix part = m;
  part.data = m.data + size_t(first) * m.row_bytes;
  part.rows = size_t(n);
  return part;
}

// The n_expert matrices of a 3-D expert tensor {cols, rows, n_expert}, each
// expert's rows contiguous.
std::vector<WeightMatrix> expert_slices(const gguf::File& f, const std::string& name, int rows, int cols, int n) {
  const gguf::TensorInfo& t = f.require_tensor(name, {uint64_t(cols), uint64_t(rows), uint64_t(n)});
  kernels::dot_kernel(t.dtype);
  std::vector<WeightMatrix> slices(static_cast<size_t>(n));
  for (size_t e = 0; e < slices.size(); ++e) {
    WeightMatrix& m = slices[e];
    m.dtype = t.dtype;
    m.rows = size_t(rows);
    m.cols = size_t(cols);
    m.row_bytes = t.n_bytes / (size_t(rows) * size_t(n));
    m.data = t.data + e * m.bytes();
  }
  return slices;
}

std::vector<float> vector_f32(const gguf::File& f, const std::string& name, int n) {
  const gguf::TensorInfo& t = f.require_tensor(name, {uint64_t(n)});
  std::vector<float> v(static_cast<size_t>(n));
  tensor::dtype_info(t.dtype).dequantize(t.data, v.data(), size_t(n));
  return v;
}

// Optional; divisors must be positive and finite, or every angle of the pair
// would be inf or NaN.
std::vector<float> rope_divisors(const gguf::File& f, const Config& c, const std::string& name) {
  if (!f.find_tensor(name)) return {};
  std::vector<float> v = vector_f32(f, name, c.rope_dim / 2);
  for (float d : v)
    if (!(d > 0.f && d < 1e30f))
      throw Error(f.path() + ": tensor '" + name + "' holds " + std::to_string(d) + " (divisors must be > 0)");
  return v;
}

// Tensors some files carry that this forward pass has no place for (biases
// after the attention output and in the FFN, Q/K/V biases in an
// architecture without them): running without them would give wrong
// logits, so such a file is refused.
void refuse_unused_biases(const gguf::File& f, const Config& c, const std::string& p) {
  std::vector<std::string> names = {"attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias"};
  if (!c.qkv_bias) names.insert(names.end(), {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_qkv.bias"});
  for (const std::string& n : names)
    if (f.find_tensor(p + n))
      throw Error(f.path() + ": tensor '" + p + n + "' is not supported (kvlab's " + c.arch + " has no bias there)");
}

// Q, K and V (and their biases), from attn_q/k/v or from one attn_qkv.
void bind_qkv(const gguf::File& f, const Config& c, const std::string& p, LayerWeights& l) {
  const int qd = c.q_dim(), kvd = c.kv_dim();
  if (f.find_tensor(p + "attn_qkv.weight")) {
    const WeightMatrix qkv = matrix(f, p + "attn_qkv.weight", qd + 2 * kvd, c.n_embd);
    l.wq = rows_of(qkv, 0, qd);
    l.wk = rows_of(qkv, qd, kvd);
    l.wv = rows_of(qkv, qd + kvd, kvd);
    if (c.qkv_bias) {
      const std::vector<float> b = vector_f32(f, p + "attn_qkv.bias", qd + 2 * kvd);
      l.bq.assign(b.begin(), b.begin() + qd);
      l.bk.assign(b.begin() + qd, b.begin() + qd + kvd);
      l.bv.assign(b.begin() + qd + kvd, b.end());
    }
    return;
  }
  l.wq = matrix(f, p + "attn_q.weight", qd, c.n_embd);
  l.wk = matrix(f, p + "attn_k.weight", kvd, c.n_embd);
  l.wv = matrix(f, p + "attn_v.weight", kvd, c.n_embd);
  if (c.qkv_bias) {
    l.bq = vector_f32(f, p + "attn_q.bias", qd);
    l.bk = vector_f32(f, p + "attn_k.bias", kvd);
    l.bv = vector_f32(f, p + "attn_v.bias", kvd);
  }
}

// The router and the experts of a mixture-of-experts layer.
void bind_experts(const gguf::File& f, const Config& c, const std::string& p, LayerWeights& l) {
  l.router = matrix(f, p + "ffn_gate_inp.weight", c.n_expert, c.n_embd);
  const auto gate = expert_slices(f, p + "ffn_gate_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
  const auto up = expert_slices(f, p + "ffn_up_exps.weight", c.n_ff_exp, c.n_embd, c.n_expert);
  const auto down = expert_slices(f, p + "ffn_down_exps.weight", c.n_embd, c.n_ff_exp, c.n_expert);
  for (size_t e = 0; e < gate.size(); ++e) l.experts.push_back({gate[e], up[e], down[e]});
  if (c.n_ff_shexp == 0) return;
  l.shared = {matrix(f, p + "ffn_gate_shexp.weight", c.n_ff_shexp, c.n_embd),
              matrix(f, p + "ffn_up_shexp.weight", c.n_ff_shexp, c.n_embd),
              matrix(f, p + "ffn_down_shexp.weight", c.n_embd, c.n_ff_shexp)};
  if (c.shared_expert_gated) l.shared_gate = vector_f32(f, p + "ffn_gate_inp_shexp.weight", c.n_embd);
}

}  // namespace

size_t LayerWeights::gate_up_bytes(int experts_per_token) const {
  if (experts.empty()) return w_gate.bytes() + w_up.bytes();
  return router.bytes() + size_t(experts_per_token) * (experts.front().gate.bytes() + experts.front().up.bytes()) +
         shared.gate.bytes() + shared.up.bytes() + shared_gate.size() * sizeof(float);
}

size_t LayerWeights::down_bytes(int experts_per_token) const {
  if (experts.empty()) return w_down.bytes();
  return size_t(experts_per_token) * experts.front().down.bytes() + shared.down.bytes();
}

size_t Weights::matmul_bytes() const {
  size_t b = output.bytes() + output_norm.size() * 4;
  for (const auto& l : layers)
    b += l.wq.bytes() + l.wk.bytes() + l.wv.bytes() + l.wo.bytes() + l.gate_up_bytes(experts_per_token) +
         l.down_bytes(experts_per_token) +
         (l.attn_norm.size() + l.ffn_norm.size() + l.bq.size() + l.bk.size() + l.bv.size() + l.q_norm.size() +
          l.k_norm.size() + l.attn_post_norm.size() + l.ffn_post_norm.size()) *
             4;
  return b;
}

const float* Weights::rope_divisors(int n_ctx, const Config& c) const {
  if (!rope_freqs.empty()) return rope_freqs.data();
  const std::vector<float>& v = n_ctx > c.rope_orig_ctx ? rope_long : rope_short;
  return v.empty() ? nullptr : v.data();
}

Weights bind_weights(const gguf::File& f, const Config& c) {
  Weights w;
  w.token_embd = matrix(f, "token_embd.weight", c.n_vocab, c.n_embd);
  w.output_norm = vector_f32(f, "output_norm.weight", c.n_embd);
  w.output = c.tied_embeddings ? w.token_embd : matrix(f, "output.weight", c.n_vocab, c.n_embd);
  w.experts_per_token = c.n_expert_used;
  w.rope_freqs = rope_divisors(f, c, "rope_freqs.weight");
  w.rope_long = rope_divisors(f, c, "rope_factors_long.weight");
  w.rope_short = rope_divisors(f, c, "rope_factors_short.weight");
  for (int i = 0; i < c.n_layer; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    LayerWeights l;
    refuse_unused_biases(f, c, p);
    if (c.input_norms) {
      l.attn_norm = vector_f32(f, p + "attn_norm.weight", c.n_embd);
      l.ffn_norm = vector_f32(f, p + "ffn_norm.weight", c.n_embd);
    }
    bind_qkv(f, c, p, l);
    l.wo = matrix(f, p + "attn_output.weight", c.n_embd, c.q_dim());
    if (c.qk_norm) {
      l.q_norm = vector_f32(f, p + "attn_q_norm.weight", c.qk_norm_whole ? c.q_dim() : c.head_dim);
      l.k_norm = vector_f32(f, p + "attn_k_norm.weight", c.qk_norm_whole ? c.kv_dim() : c.head_dim);
    }
    if (c.post_norms) {
      l.attn_post_norm = vector_f32(f, p + "post_attention_norm.weight", c.n_embd);
      l.ffn_post_norm = vector_f32(f, p + "post_ffw_norm.weight", c.n_embd);
    }
    if (c.is_moe()) {
      bind_experts(f, c, p, l);
    } else if (c.fused_gate_up) {
      const WeightMatrix gate_up = matrix(f, p + "ffn_up.weight", 2 * c.n_ff, c.n_embd);
      l.w_gate = rows_of(gate_up, 0, c.n_ff);
      l.w_up = rows_of(gate_up, c.n_ff, c.n_ff);
    } else {
      l.w_gate = matrix(f, p + "ffn_gate.weight", c.n_ff, c.n_embd);
      l.w_up = matrix(f, p + "ffn_up.weight", c.n_ff, c.n_embd);
    }
    if (!c.is_moe()) l.w_down = matrix(f, p + "ffn_down.weight", c.n_embd, c.n_ff);
    w.layers.push_back(std::move(l));
  }
  return w;
}

void relayout_for_kernels(Weights& w, gguf::File& file) {
  auto relayout = [&](WeightMatrix& m) {
    if (uint8_t* bytes = file.resident_bytes(m.data)) kernels::relayout_rows8(m, bytes);
  };
  auto relayout_ffn = [&](ExpertWeights& x) {
    for (WeightMatrix* m : {&x.gate, &x.up, &x.down}) relayout(*m);
  };
  const bool tied = w.output.data == w.token_embd.data;
  relayout(w.token_embd);
  if (tied) w.output = w.token_embd;  // one tensor: re-laid out once
  else relayout(w.output);
  for (auto& l : w.layers) {
    for (WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.router}) relayout(*m);
    for (ExpertWeights& x : l.experts) relayout_ffn(x);
    relayout_ffn(l.shared);
  }
}

}  // namespace kvlab::model
