// Loading, and the forward pass of the llama-family decoder:
//   x = embed(token)
//   for each layer:
//     x += Wo · attention(rope(Wq·norm(x)), rope(Wk·norm(x)), Wv·norm(x))
//          (qwen2: + bq, + bk, + bv after each projection, before RoPE;
//           gemma3: RMSNorm of each Q and K head before RoPE, a sliding window
//           in local layers, and RMSNorm of the sub-layer output before the add;
//           gemma2: gemma3's without the Q/K norms, scores soft-capped)
//     x += Wdown · (silu(Wgate·norm(x)) * (Wup·norm(x)))   (gemma: gelu, post-norm;
//          a mixture of experts: the weighted sum of the router's picks' FFNs)
//   logits = Wout · norm(x)                                (gemma: x starts as embed·sqrt(n_embd);
//                                                           optional tanh soft-cap)
// smollm3 rotates nothing in every fourth layer (NoPE). RoPE angles are
// divided per pair by rope_freqs where the file has it (Llama 3.1+'s
// long-context rule), or by Phi-3's LongRoPE factors, and YaRN blends
// scaled and unscaled angles, as llama.cpp does.
// phi3 reads gate and up (and Q, K, V) from fused matrices (weights.cpp);
// granite scales the embeddings, each residual branch and the logits.
#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"
#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/rows8.h"
#include "kv/cache.h"
#include "model/experts.h"
#include "model/workspace.h"

namespace kvlab::model {

using kernels::matmul;

namespace {

// The global layers' RoPE: linear scaling, per-pair divisors, YaRN's ramp
// (Config's rope_* fields).
kernels::RopeScaling global_rope(const Config& c, const float* divisors) {
  kernels::RopeScaling s{.freq_scale = c.rope_freq_scale, .freq_divisors = divisors, .attn_factor = c.rope_attn_factor};
  if (c.rope_yarn) {
    s.ext_factor = 1.0f;
    s.ramp_low = c.rope_yarn_ramp[0];
    s.ramp_high = c.rope_yarn_ramp[1];
  }
  return s;
}

}  // namespace

std::unique_ptr<Model> Model::load(const std::string& path, gguf::Residency residency) {
  gguf::File file = gguf::File::open(path, residency);
  Config cfg = load_config(file);
  Weights w = bind_weights(file, cfg);
  relayout_for_kernels(w, file);
  return std::unique_ptr<Model>(new Model(std::move(file), std::move(cfg), std::move(w)));
}

uint64_t Model::n_params() const {
  uint64_t n = 0;
  for (const auto& t : file_.tensors()) n += t.n_elements();
  return n;
}

void Model::attention_block(const LayerWeights& l, int layer, std::span<const BatchEntry> batch, kv::Cache& cache,
                            Workspace& ws, kernels::ThreadPool& pool, StageClock& clock) const {
  const size_t T = batch.size();
  input_norm(l.attn_norm, T, ws, pool);
  clock.mark(Stage::AttnNorm);
  // A few tokens (decode) store K and V into lines that are out of the
  // caches by now; ask for them before the matmuls, which take long enough
  // for the lines to arrive. A longer batch's tokens share their blocks,
  // which the first store brings in.
  if (T <= size_t(kv::Cache::kBlockTokens))
    for (const BatchEntry& e : batch) cache.prefetch_store(layer, e.seq, e.pos);
  const kernels::MatmulOut qkv[] = {{&l.wq, ws.q.data()}, {&l.wk, ws.k.data()}, {&l.wv, ws.v.data()}};
  matmul(qkv, ws.xn.data(), T, pool, ws.mm);
  clock.mark(Stage::Qkv);
  rope_and_store(l, layer, batch, cache, ws, pool);
  clock.mark(Stage::RopeStore);
  attend(layer, batch, cache, ws, pool);
  clock.mark(Stage::Attention);
  matmul(l.wo, ws.att.data(), T, ws.xn.data(), pool, ws.mm);
  clock.mark(Stage::O);
  add_residual(l.attn_post_norm, T, ws, pool);
  clock.mark(Stage::Residual);
}

// Biases (qwen2), RoPE on every query and key head (and mistral3's
// attention temperature on the queries), then append K and V to the cache.
void Model::rope_and_store(const LayerWeights& l, int layer, std::span<const BatchEntry> batch, kv::Cache& cache,
                           Workspace& ws, kernels::ThreadPool& pool) const {
  const Config& c = cfg_;
  const size_t hd = size_t(c.head_dim), qd = size_t(c.q_dim()), kvd = size_t(c.kv_dim());
  const bool neox = c.rope_order == RopeOrder::NeoX;
  auto rope_and_store_token = [&](size_t t) {
    if (c.qkv_bias) {
      kernels::add(&ws.q[t * qd], l.bq.data(), qd);
      kernels::add(&ws.k[t * kvd], l.bk.data(), kvd);
      kernels::add(&ws.v[t * kvd], l.bv.data(), kvd);
    }
    if (c.qk_norm && c.qk_norm_whole) {
      kernels::rmsnorm(&ws.q[t * qd], l.q_norm.data(), qd, c.rms_eps, &ws.q[t * qd]);
      kernels::rmsnorm(&ws.k[t * kvd], l.k_norm.data(), kvd, c.rms_eps, &ws.k[t * kvd]);
    } else if (c.qk_norm) {
      for (int h = 0; h < c.n_head; ++h) {
        float* qh = &ws.q[t * qd + size_t(h) * hd];
        kernels::rmsnorm(qh, l.q_norm.data(), hd, c.rms_eps, qh);
      }
      for (int h = 0; h < c.n_head_kv; ++h) {
        float* kh = &ws.k[t * kvd + size_t(h) * hd];
        kernels::rmsnorm(kh, l.k_norm.data(), hd, c.rms_eps, kh);
      }
    }
    if (c.uses_rope(layer)) {
      const float* cs = &(c.is_swa(layer) ? ws.rope_swa : ws.rope)[t * size_t(c.rope_dim)];
      for (int h = 0; h < c.n_head; ++h) kernels::rope(&ws.q[t * qd + size_t(h) * hd], size_t(c.rope_dim), cs, neox);
      for (int h = 0; h < c.n_head_kv; ++h) kernels::rope(&ws.k[t * kvd + size_t(h) * hd], size_t(c.rope_dim), cs, neox);
    }
    if (c.attn_temp_scale != 0.f) {
      const float s = c.attn_temperature(batch[t].pos);
      for (size_t i = 0; i < qd; ++i) ws.q[t * qd + i] *= s;
    }
    const BatchEntry& e = batch[t];
    for (int h = 0; h < c.n_head_kv; ++h) {
      cache.store_k(layer, h, e.seq, e.pos, &ws.k[t * kvd + size_t(h) * hd]);
      cache.store_v(layer, h, e.seq, e.pos, &ws.v[t * kvd + size_t(h) * hd]);
    }
  };
  // One task per run of entries that store into the same cache block. The
  // 16 positions of a block share each line of its f16 or q8_0 K tile
  // (kernels/kv_tiles.h), so tokens of one block on two threads would write
  // the same lines from two cores; split by blocks, a short prompt's pass
  // spends less than half the time in this stage (`kvlab bench -p 32
  // --profile`, stage "RoPE + KV store"). Decode batches of several sequences
  // stay one task per token.
  pool.for_each(ws.kv_block_runs.size() - 1, [&](size_t run, int) {
    for (size_t t = ws.kv_block_runs[run]; t < ws.kv_block_runs[run + 1]; ++t) rope_and_store_token(t);
  });
}

// Causal attention: token t at position p sees cache positions 0..p of its
// sequence (in a local layer, the last swa_window of them). The G = n_head /
// n_head_kv query heads of KV head g are g*G .. g*G+G-1 (grouped-query
// attention) and go together.
void Model::attend(int layer, std::span<const BatchEntry> batch, const kv::Cache& cache, Workspace& ws,
                   kernels::ThreadPool& pool) const {
  const Config& c = cfg_;
  const size_t T = batch.size(), hd = size_t(c.head_dim), qd = size_t(c.q_dim());
  const float scale = c.attn_scale();
  const int G = c.gqa_group(), n_kv = c.n_head_kv;
  auto view = [&](const BatchEntry& e, size_t g) {
    kernels::KvView kv;
    kv.k = cache.k_head(layer, int(g));
    kv.v = cache.v_head(layer, int(g));
    kv.row_stride = cache.head_bytes();
    kv.type = cache.type();
    kv.blocks = cache.layer_table(layer, e.seq);
    kv.block_tokens = kv::Cache::kBlockTokens;
    kv.block_stride = cache.head_block_bytes();
    return kv;
  };
  ws.attn_items.clear();
  for (size_t t = 0; t < T; ++t)
    for (size_t g = 0; g < size_t(n_kv); ++g) {
      const size_t at = t * qd + g * size_t(G) * hd;
      ws.attn_items.push_back({&ws.q[at], view(batch[t], g), batch[t].pos + 1, &ws.att[at],
                               c.first_visible(layer, batch[t].pos)});
    }
  if (ws.attended)
    for (const kernels::AttnItem& item : ws.attn_items) *ws.attended += uint64_t(item.n_pos - item.first);
  kernels::attend_batch(ws.attn_items, G, hd, {scale, c.attn_softcap}, pool, ws.attn);
}

// xn = norm(x), or x itself where the architecture has no input norms (olmo2).
void Model::input_norm(const std::vector<float>& weight, size_t T, Workspace& ws, kernels::ThreadPool& pool) const {
  const size_t E = size_t(cfg_.n_embd);
  pool.for_each(T, [&](size_t t, int) {
    if (weight.empty()) std::copy_n(&ws.x[t * E], E, &ws.xn[t * E]);
    else kernels::rmsnorm(&ws.x[t * E], weight.data(), E, cfg_.rms_eps, &ws.xn[t * E]);
  });
}

// x += out, or x += norm(out) when the layer has a post-norm (gemma3), or
// x += out * residual_scale (granite: rounded before the add, as llama.cpp's
// separate scale and add are).
void Model::add_residual(const std::vector<float>& post_norm, size_t T, Workspace& ws,
                         kernels::ThreadPool& pool) const {
  const size_t E = size_t(cfg_.n_embd);
  const float scale = cfg_.residual_scale;
  pool.for_each(T, [&](size_t t, int) {
    float* out = &ws.xn[t * E];
    if (!post_norm.empty()) kernels::rmsnorm(out, post_norm.data(), E, cfg_.rms_eps, out);
    if (scale != 0.f)
      for (size_t i = 0; i < E; ++i) out[i] *= scale;
    kernels::add(&ws.x[t * E], out, E);
  });
}

// down · act(gate · in, up · in) for n rows of `in` (the dense FFN, or one
// expert over its tokens), into `out`, which may be `in`.
void Model::gated_ffn(const WeightMatrix& gate, const WeightMatrix& up, const WeightMatrix& down, const float* in,
                      size_t n, float* out, Workspace& ws, kernels::ThreadPool& pool, StageClock& clock) const {
  const size_t F = gate.rows;
  const kernels::MatmulOut gate_up[] = {{&gate, ws.gate.data()}, {&up, ws.up.data()}};
  matmul(gate_up, in, n, pool, ws.mm);
  clock.mark(Stage::GateUp);
  pool.for_each(n, [&](size_t t, int) {
    if (cfg_.ffn_act == FfnAct::GeluTanh) kernels::gelu_mul(&ws.gate[t * F], &ws.up[t * F], F);
    else kernels::silu_mul(&ws.gate[t * F], &ws.up[t * F], F);
  });
  clock.mark(Stage::Activation);
  matmul(down, ws.gate.data(), n, out, pool, ws.mm);
  clock.mark(Stage::Down);
}

// A mixture of experts, as llama.cpp's build_moe_ffn builds it: the router
// picks each token's experts (model/experts.h); each expert runs once over
// the tokens that picked it; each pick's output times its weight, and a
// token's picks added in pick order, then the shared expert's output where
// there is one, replace xn. The routing and gathering count as the gate and
// up projections' stage.
void Model::expert_ffn(const LayerWeights& l, size_t T, Workspace& ws, kernels::ThreadPool& pool,
                       StageClock& clock) const {
  const Config& c = cfg_;
  const size_t E = size_t(c.n_embd), K = size_t(c.n_expert_used);
  if (c.n_ff_shexp > 0) shared_expert(l, T, ws, pool, clock);
  matmul(l.router, ws.xn.data(), T, ws.router_logits.data(), pool, ws.mm);
  for (size_t t = 0; t < T; ++t)
    pick_experts(&ws.router_logits[t * size_t(c.n_expert)], c.n_expert, c.n_expert_used, c.expert_weights_norm,
                 &ws.picks[t * K]);
  ws.expert_groups.build(std::span(ws.picks.data(), T * K), c.n_expert);
  for (int e = 0; e < c.n_expert; ++e) {
    const std::span<const uint32_t> slots = ws.expert_groups.of(e);
    if (slots.empty()) continue;
    for (size_t i = 0; i < slots.size(); ++i) std::copy_n(&ws.xn[slots[i] / K * E], E, &ws.expert_in[i * E]);
    const ExpertWeights& x = l.experts[size_t(e)];
    gated_ffn(x.gate, x.up, x.down, ws.expert_in.data(), slots.size(), ws.expert_out.data(), ws, pool, clock);
    for (size_t i = 0; i < slots.size(); ++i) {
      const float w = ws.picks[slots[i]].weight;
      for (size_t j = 0; j < E; ++j) ws.expert_sum[slots[i] * E + j] = ws.expert_out[i * E + j] * w;
    }
  }
  pool.for_each(T, [&](size_t t, int) {
    float* out = &ws.xn[t * E];
    std::copy_n(&ws.expert_sum[t * K * E], E, out);
    for (size_t j = 1; j < K; ++j) kernels::add(out, &ws.expert_sum[(t * K + j) * E], E);
    if (c.n_ff_shexp > 0) kernels::add(out, &ws.shared_out[t * E], E);
  });
}

// The shared expert's output for every token, into shared_out: times
// sigmoid(w · xn) where it is gated (qwen2moe; llama.cpp's silu(s) / s).
void Model::shared_expert(const LayerWeights& l, size_t T, Workspace& ws, kernels::ThreadPool& pool,
                          StageClock& clock) const {
  const size_t E = size_t(cfg_.n_embd);
  gated_ffn(l.shared.gate, l.shared.up, l.shared.down, ws.xn.data(), T, ws.shared_out.data(), ws, pool, clock);
  if (l.shared_gate.empty()) return;
  pool.for_each(T, [&](size_t t, int) {
    float s = 0.f;
    for (size_t i = 0; i < E; ++i) s += l.shared_gate[i] * ws.xn[t * E + i];
    const float gate = 1.0f / (1.0f + std::exp(-s));
    for (size_t i = 0; i < E; ++i) ws.shared_out[t * E + i] *= gate;
  });
}

void Model::ffn_block(const LayerWeights& l, size_t T, Workspace& ws, kernels::ThreadPool& pool,
                      StageClock& clock) const {
  input_norm(l.ffn_norm, T, ws, pool);
  clock.mark(Stage::FfnNorm);
  if (cfg_.is_moe()) expert_ffn(l, T, ws, pool, clock);
  else gated_ffn(l.w_gate, l.w_up, l.w_down, ws.xn.data(), T, ws.xn.data(), ws, pool, clock);
  add_residual(l.ffn_post_norm, T, ws, pool);
  clock.mark(Stage::Residual);
}

void Model::forward(std::span<const BatchEntry> batch, kv::Cache& cache, Workspace& ws, kernels::ThreadPool& pool,
                    float* logits) const {
  const Config& c = cfg_;
  const size_t T = batch.size(), E = size_t(c.n_embd);
  if (T == 0) return;
  if (T > size_t(ws.max_tokens()))
    throw Error("batch of " + std::to_string(T) + " tokens exceeds the workspace (" + std::to_string(ws.max_tokens()) + ")");
  // Every entry must attend only to positions that exist once this batch has
  // written its own: the cache's filled prefix or earlier entries' positions.
  std::vector<int> filled(size_t(cache.n_seq()));
  for (int s = 0; s < cache.n_seq(); ++s) filled[size_t(s)] = cache.used(s);
  for (const auto& e : batch) {
    if (e.token < 0 || e.token >= c.n_vocab) throw Error("token id " + std::to_string(e.token) + " is out of range");
    if (e.seq < 0 || e.seq >= cache.n_seq()) throw Error("sequence " + std::to_string(e.seq) + " is out of range");
    if (e.pos < 0 || e.pos >= cache.n_ctx())
      throw Error("position " + std::to_string(e.pos) + " is beyond the context size " + std::to_string(cache.n_ctx()));
    if (e.pos > filled[size_t(e.seq)]) throw Error("position " + std::to_string(e.pos) + " leaves a gap in the KV cache");
    if (!cache.mapped(e.seq, e.pos))
      throw Error("position " + std::to_string(e.pos) + " of sequence " + std::to_string(e.seq) + " has no KV block");
    filled[size_t(e.seq)] = std::max(filled[size_t(e.seq)], e.pos + 1);
  }
  // A sliding-window layer's ring holds its window plus max_batch positions
  // (kv/cache.h): a pass adding more to one sequence would overwrite rows
  // its own first tokens still see.
  if (cache.max_batch() > 0) {
    std::vector<int> added(size_t(cache.n_seq()));
    for (const auto& e : batch)
      if (++added[size_t(e.seq)] > cache.max_batch())
        throw Error("batch adds more than " + std::to_string(cache.max_batch()) + " positions to sequence " +
                    std::to_string(e.seq) + ", the most its KV cache was sized for");
  }

  // The runs of entries storing into one cache block (rope_and_store).
  ws.kv_block_runs.clear();
  for (size_t t = 0; t < T; ++t)
    if (t == 0 || batch[t].seq != batch[t - 1].seq ||
        batch[t].pos / kv::Cache::kBlockTokens != batch[t - 1].pos / kv::Cache::kBlockTokens)
      ws.kv_block_runs.push_back(uint32_t(t));
  ws.kv_block_runs.push_back(uint32_t(T));

  StageClock clock(ws.stage_times);
  pool.for_each(T, [&](size_t t, int) {
    float* x = &ws.x[t * E];
    kernels::dequantize_row(w_.token_embd, size_t(batch[t].token), x);
    if (const float s = c.scale_embeddings ? std::sqrt(float(E)) : c.embedding_scale; s != 0.f)
      for (size_t i = 0; i < E; ++i) x[i] *= s;
    const size_t rd = size_t(c.rope_dim);
    kernels::rope_table(batch[t].pos, rd, c.rope_theta, &ws.rope[t * rd], global_rope(c, w_.rope_divisors(cache.n_ctx(), c)));
    if (c.swa_window > 0)
      kernels::rope_table(batch[t].pos, rd, c.rope_theta_swa, &ws.rope_swa[t * rd], {.attn_factor = c.rope_attn_factor});
  });
  clock.mark(Stage::Embedding);
  for (int i = 0; i < c.n_layer; ++i) {
    attention_block(w_.layers[size_t(i)], i, batch, cache, ws, pool, clock);
    ffn_block(w_.layers[size_t(i)], T, ws, pool, clock);
  }
  for (int s = 0; s < cache.n_seq(); ++s) cache.set_used(s, filled[size_t(s)]);

  // Logits only for the entries that asked: gather their rows first so the
  // LM head (the largest matmul) runs once over just those.
  size_t n_out = 0;
  for (size_t t = 0; t < T; ++t) {
    if (!batch[t].want_logits) continue;
    kernels::rmsnorm(&ws.x[t * E], w_.output_norm.data(), E, c.rms_eps, &ws.xn[n_out * E]);
    ++n_out;
  }
  if (n_out > 0) matmul(w_.output, ws.xn.data(), n_out, logits, pool, ws.mm);
  if (const float cap = c.final_logit_softcap; cap > 0.f && n_out > 0) {
    pool.for_each(n_out, [&](size_t t, int) {
      float* row = logits + t * size_t(c.n_vocab);
      for (int i = 0; i < c.n_vocab; ++i) row[i] = cap * std::tanh(row[i] / cap);
    });
  }
  if (c.logit_scale != 0.f && n_out > 0) {  // granite: times 1/logit_scale, as llama.cpp scales
    const float inverse = 1.0f / c.logit_scale;
    pool.for_each(n_out, [&](size_t t, int) {
      float* row = logits + t * size_t(c.n_vocab);
      for (int i = 0; i < c.n_vocab; ++i) row[i] *= inverse;
    });
  }
  clock.mark(Stage::LmHead);
}

}  // namespace kvlab::model
